package buildinfo

import (
	"runtime/debug"
	"testing"
)

// TestPick: a stamped version wins, then the module's, then the commit
// (dirty marked), then "devel".
func TestPick(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}}
	for _, tc := range []struct {
		stamped string
		info    *debug.BuildInfo
		want    string
	}{
		{"v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}}, "v1.2.3"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}, Settings: rev}, "v0.9.0"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev}, "devel-0123456789ab"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, "devel-0123456789ab+dirty"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"", nil, "devel"},
	} {
		if got := pick(tc.stamped, tc.info); got != tc.want {
			t.Errorf("pick(%q, %+v) = %q, want %q", tc.stamped, tc.info, got, tc.want)
		}
	}
	if Version() == "" || Platform() == "" {
		t.Error("empty version or platform")
	}
}
