package userfile

import "path/filepath"

// Abs is path made absolute, or path as it is when it cannot be (the
// working directory is gone): for saying where something is, never for
// opening it.
func Abs(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return path
}
