package enumtext

import "testing"

func TestParse(t *testing.T) {
	type kind uint8
	names := []string{"none", "a", "b"}
	k := kind(1)
	if err := Parse(&k, names, []byte("b"), "kind"); err != nil || k != 2 {
		t.Fatalf("b: %d %v", k, err)
	}
	if err := Parse(&k, names, []byte("c"), "kind"); err == nil || err.Error() != `unknown kind "c"` || k != 2 {
		t.Fatalf("c: %d %v", k, err)
	}
}
