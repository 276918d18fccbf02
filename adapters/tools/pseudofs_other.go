//go:build !linux

package tools

import "os"

// pseudoFS: only Linux mounts procfs and sysfs.
func pseudoFS(*os.File) string { return "" }
