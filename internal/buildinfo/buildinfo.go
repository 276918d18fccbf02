// Package buildinfo says which escapement this is: the version a release
// build was stamped with, else the one the Go toolchain recorded (a module
// version for `go install …@version`, a pseudo-version from the commit for
// a build in a checkout), else the commit, else "devel".
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// version is set by a release build:
//
//	go build -ldflags "-X github.com/escapement/escapement/internal/buildinfo.version=v1.2.3" ./cmd/escapement
var version string

// Version is this build's version (never empty).
func Version() string {
	info, _ := debug.ReadBuildInfo()
	return pick(version, info)
}

// pick chooses the version: the stamped one, the main module's (not
// "(devel)"), the VCS revision (marked +dirty for a modified tree), or
// "devel".
func pick(stamped string, info *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if info == nil {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if rev == "" {
		return "devel"
	}
	return "devel-" + rev + dirty
}

// Platform is the Go version and the platform the binary was built for
// ("go1.26.0 linux/amd64").
func Platform() string { return runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH }
