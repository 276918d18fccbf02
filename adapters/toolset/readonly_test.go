package toolset

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/tools"
)

// TestReadOnly: a set names the read-only tools of the groups that say
// which theirs are; a function tool is never one.
func TestReadOnly(t *testing.T) {
	box, err := tools.New(tools.Config{Workspace: t.TempDir(), AllowShell: true})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	s, err := New(box)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddFunc(ports.ToolSpec{Name: "lookup"}, func(context.Context, json.RawMessage) (string, error) { return "", nil }); err != nil {
		t.Fatal(err)
	}
	outer, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"read_file", "list_dir", "grep"}
	if got := outer.ReadOnly(); !slices.Equal(got, want) {
		t.Errorf("ReadOnly %v, want %v", got, want)
	}
}
