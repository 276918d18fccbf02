// Package toy is the runner's fixture: its tests kill some mutants and miss
// others, one layer at a time.
package toy

// Add returns a+b. TestAdd kills a - b.
func Add(a, b int) int { return a + b }

// Positive reports n > 0. TestPositive kills n > 1 but not n >= 0.
func Positive(n int) bool { return n > 0 }

// Sum adds 0..n-1. With i-- for i++ it never ends.
func Sum(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i
	}
	return s
}

// Sign is -1 or 1. Without one of its returns it does not compile.
func Sign(n int) int {
	if n < 0 {
		return -1
	} else {
		return 1
	}
}
