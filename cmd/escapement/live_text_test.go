package main

import "testing"

// TestClipOneLine: the activity lines' clipped text is one line, cut as
// textcut.Clip cuts (its own tests cover every cut).
func TestClipOneLine(t *testing.T) {
	if got, want := clip("a\nb\nc😀d", 7), "a b c…"; got != want {
		t.Errorf("clip = %q, want %q", got, want)
	}
}
