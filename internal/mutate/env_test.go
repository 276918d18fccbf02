package mutate

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestNestedBuildsSeeTheMutant: a mutant's commands carry its overlay in
// GOFLAGS, so a test that runs `go build` itself (the CLI's end-to-end
// tests) builds the mutant, not the file on disk; the baseline's do not.
func TestNestedBuildsSeeTheMutant(t *testing.T) {
	t.Setenv("GOFLAGS", "-mod=mod")
	r := &runner{}
	tmp := t.TempDir()
	if env := r.env(tmp); slices.ContainsFunc(env, func(kv string) bool { return kv == "GOFLAGS=-mod=mod -overlay="+filepath.Join(tmp, "overlay.json") }) {
		t.Errorf("the baseline's environment names an overlay: %q", env)
	}
	if err := os.WriteFile(filepath.Join(tmp, "overlay.json"), []byte(`{"Replace":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := r.env(tmp)
	want := "GOFLAGS=-mod=mod -overlay=" + filepath.Join(tmp, "overlay.json")
	if i := slices.Index(env, want); i < 0 || slices.ContainsFunc(env[i+1:], func(kv string) bool { return len(kv) > 8 && kv[:8] == "GOFLAGS=" }) {
		t.Errorf("environment %q, want %q as the last GOFLAGS", env, want)
	}
}
