package mutate

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strings"
)

// Sample picks n of the mutants, deterministically for a seed: the same
// mutants and seed always give the same sample. Packages are sampled in
// proportion to their mutant counts (largest remainder), so a small package
// is not left out by chance; within a package the pick is a seeded shuffle.
// The sample keeps the input's order. n <= 0 or n >= len(ms) returns ms.
func Sample(ms []*Mutant, n int, seed uint64) []*Mutant {
	if n <= 0 || n >= len(ms) {
		return ms
	}
	byPkg := map[string][]int{}
	var pkgs []string
	for i, m := range ms {
		if _, ok := byPkg[m.Pkg]; !ok {
			pkgs = append(pkgs, m.Pkg)
		}
		byPkg[m.Pkg] = append(byPkg[m.Pkg], i)
	}
	slices.Sort(pkgs)
	type share struct {
		pkg  string
		take int
		rem  int // remainder numerator: who gets the leftovers
	}
	shares := make([]share, len(pkgs))
	given := 0
	for i, p := range pkgs {
		num := len(byPkg[p]) * n
		shares[i] = share{p, num / len(ms), num % len(ms)}
		given += shares[i].take
	}
	order := make([]int, len(shares))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(shares[b].rem, shares[a].rem), strings.Compare(shares[a].pkg, shares[b].pkg))
	})
	for _, i := range order[:n-given] {
		shares[i].take++
	}
	r := rand.New(rand.NewPCG(seed, 0x6d75746174650a)) // a fixed stream per seed
	var picked []int
	for _, s := range shares {
		idx := slices.Clone(byPkg[s.pkg])
		r.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		picked = append(picked, idx[:s.take]...)
	}
	slices.Sort(picked)
	out := make([]*Mutant, len(picked))
	for i, k := range picked {
		out[i] = ms[k]
	}
	return out
}
