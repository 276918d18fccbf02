//go:build plan9

package ops

func planNine(x int) bool { return x > 1 }
