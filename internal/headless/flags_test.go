package headless

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChatCommand(t *testing.T) {
	cases := []struct {
		line, name, arg string
		ok              bool
	}{
		{"/help", "help", "", true},
		{"/queue  next turn  ", "queue", "next turn", true},
		{"/compact keep the plan", "compact", "keep the plan", true},
		{"/usr/lib is missing", "", "", false},
		{"/ spaced", "", "", false},
		{"hello", "", "", false},
	}
	for _, c := range cases {
		name, arg, ok := ChatCommand(c.line)
		if name != c.name || arg != c.arg || ok != c.ok {
			t.Errorf("ChatCommand(%q) = %q, %q, %v; want %q, %q, %v", c.line, name, arg, ok, c.name, c.arg, c.ok)
		}
	}
}

func TestLoadMCPNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadMCP([]string{empty}); err == nil || !strings.Contains(err.Error(), empty) {
		t.Fatalf("LoadMCP(no servers) = %v; want an error naming %s", err, empty)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadMCP([]string{bad}); err == nil || !strings.Contains(err.Error(), "--mcp-config") {
		t.Fatalf("LoadMCP(bad) = %v; want an --mcp-config error", err)
	}
	if s, err := LoadMCP(nil); err != nil || s != nil {
		t.Fatalf("LoadMCP(nil) = %v, %v; want nothing", s, err)
	}
}
