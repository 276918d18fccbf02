package ops

import "testing"

func TestNothing(t *testing.T) {
	if 1 > 2 {
		t.Fatal("no")
	}
}
