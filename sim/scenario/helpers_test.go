package scenario

import (
	"testing"

	"github.com/escapement/escapement/scenarios"
)

// suite is the embedded scenario suite.
func suite(t testing.TB) []*Scenario {
	t.Helper()
	ss, err := LoadFS(scenarios.FS, ".", "scenarios")
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// mustLoad loads a scenario written inline, failing the test on bad input.
func mustLoad(t testing.TB, src string) *Scenario {
	t.Helper()
	s, err := Load(t.Name()+".yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// byName is the embedded scenario called name.
func byName(t testing.TB, name string) *Scenario {
	t.Helper()
	for _, s := range suite(t) {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no scenario %q", name)
	return nil
}

// fuzzSeeds are FuzzLoad's seed corpus: every embedded scenario and a few
// inputs the loader must refuse or take apart carefully.
func fuzzSeeds(f *testing.F) {
	for _, s := range suite(f) {
		f.Add(s.YAML())
	}
	f.Add([]byte(goodHead + "inputs:\n  - {at: 0s, submit: go}\n  - {at: 1s, cancel: child}\n"))
	f.Add([]byte("name: x\nagents: {main: [{text: a b c, rate: 0.001}]}\ninputs: [{at: 0s, submit: s}]\n"))
	f.Add([]byte("name: x\nagents: &a {main: []}\nexpect: {outcomes: {main: *a}}\n"))
	f.Add([]byte("name: x\nabout: caf\xe9\nagents: {main: []}\n"))
	f.Add([]byte("\xff\xfen\x00a\x00m\x00e\x00:\x00 \x00x\x00\n\x00"))
	f.Add([]byte(bomb(4, 2)))
}
