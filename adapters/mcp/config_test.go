package mcp

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// TestConfigParses: the .mcp.json shapes of Claude Code, Claude Desktop and
// Cursor, with ${VAR} and ${VAR:-default} expanded; type inferred from
// command or url; servers in file order.
func TestConfigParses(t *testing.T) {
	src := `{
  "mcpServers": {
    "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {"GITHUB_TOKEN": "${GH}", "MODE": "${MODE:-fast}"}},
    "web": {"type": "http", "url": "https://example.test/mcp", "headers": {"Authorization": "Bearer ${GH}"}},
    "cursor-style": {"url": "http://127.0.0.1:9/mcp"},
    "explicit": {"type": "stdio", "command": "${HOME}/bin/srv", "args": ["$NOT_EXPANDED", "a${EMPTY}b"]}
  }
}`
	got, err := parseConfig("m.json", []byte(src), lookup(map[string]string{"GH": "ghp_1", "HOME": "/home/u", "EMPTY": ""}))
	if err != nil {
		t.Fatal(err)
	}
	want := []ServerConfig{
		{Name: "everything", File: "m.json", Type: TypeStdio, Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"}, Env: map[string]string{"GITHUB_TOKEN": "ghp_1", "MODE": "fast"}, Secrets: []string{"ghp_1"}, SecretVars: []string{"GH"}},
		{Name: "web", File: "m.json", Type: TypeHTTP, URL: "https://example.test/mcp", Headers: map[string]string{"Authorization": "Bearer ghp_1"}, Secrets: []string{"ghp_1"}, SecretVars: []string{"GH"}},
		{Name: "cursor-style", File: "m.json", Type: TypeHTTP, URL: "http://127.0.0.1:9/mcp"},
		{Name: "explicit", File: "m.json", Type: TypeStdio, Command: "/home/u/bin/srv", Args: []string{"$NOT_EXPANDED", "ab"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// TestConfigErrors: every bad file is refused with file:line:col, the
// field path and what is wrong.
func TestConfigErrors(t *testing.T) {
	env := lookup(map[string]string{"OPENAI_API_KEY": "sk-x", "SET": "1"})
	for _, tc := range []struct{ name, src, want string }{
		{"syntax", "{\n  \"mcpServers\": {,}\n}", `c.json:2:18: invalid JSON`},
		{"truncated", `{"mcpServers": {"a": {"command": "x"`, `c.json:1:37: invalid JSON: unexpected end of file`},
		{"not an object", `[]`, `c.json:1:1: want an object, got an array`},
		{"no servers", `{}`, `c.json: no "mcpServers" field`},
		{"unknown top field", `{"mcpServers": {}, "globalShortcut": "x"}`, `c.json:1:20: globalShortcut: unknown field`},
		{"servers not object", `{"mcpServers": []}`, `c.json:1:16: mcpServers: want an object, got an array`},
		{"repeated server", "{\"mcpServers\": {\n \"a\": {\"command\": \"x\"},\n \"a\": {\"command\": \"y\"}}}", `c.json:3:2: mcpServers.a: repeated key`},
		{"empty name", `{"mcpServers": {"": {"command": "x"}}}`, `mcpServers.: a server needs a non-empty name`},
		{"unknown server field", `{"mcpServers": {"a": {"command": "x", "cwd": "/"}}}`, `c.json:1:39: mcpServers.a.cwd: unknown field`},
		{"command type", `{"mcpServers": {"a": {"command": 7}}}`, `c.json:1:34: mcpServers.a.command: want a string, got the number 7`},
		{"empty command", `{"mcpServers": {"a": {"command": " "}}}`, `mcpServers.a.command: empty command`},
		{"args type", `{"mcpServers": {"a": {"command": "x", "args": "-y"}}}`, `c.json:1:47: mcpServers.a.args: want an array of strings, got the string "-y"`},
		{"arg type", `{"mcpServers": {"a": {"command": "x", "args": ["ok", true]}}}`, `c.json:1:54: mcpServers.a.args[1]: want a string, got true`},
		{"env value type", `{"mcpServers": {"a": {"command": "x", "env": {"N": 1}}}}`, `mcpServers.a.env.N: want a string, got the number 1`},
		{"env repeated", `{"mcpServers": {"a": {"command": "x", "env": {"N": "1", "N": "2"}}}}`, `mcpServers.a.env.N: repeated key`},
		{"env api key", `{"mcpServers": {"a": {"command": "x", "env": {"OPENAI_API_KEY": "sk-other"}}}}`, `mcpServers.a.env.OPENAI_API_KEY: OPENAI_API_KEY cannot be passed`},
		{"env bad name", `{"mcpServers": {"a": {"command": "x", "env": {"A=B": "1"}}}}`, `mcpServers.a.env.A=B: "A=B" is not a variable name`},
		{"expand api key", `{"mcpServers": {"a": {"command": "x", "args": ["${OPENAI_API_KEY}"]}}}`, `mcpServers.a.args[0]: ${OPENAI_API_KEY}: the model's API key is never passed`},
		{"expand unset", `{"mcpServers": {"a": {"command": "x", "env": {"T": "${UNSET}"}}}}`, `mcpServers.a.env.T: ${UNSET}: the variable UNSET is not set`},
		{"expand unclosed", `{"mcpServers": {"a": {"command": "${SET"}}}`, `mcpServers.a.command: unclosed ${`},
		{"expand bad name", `{"mcpServers": {"a": {"command": "${1X}"}}}`, `mcpServers.a.command: ${1X}: "1X" is not a variable name`},
		{"bad type", `{"mcpServers": {"a": {"type": "websocket", "url": "http://h"}}}`, `mcpServers.a.type: "websocket": want "stdio" or "http"`},
		{"sse", `{"mcpServers": {"a": {"type": "sse", "url": "http://h"}}}`, `mcpServers.a.type: "sse" (the deprecated HTTP+SSE transport) is not supported`},
		{"neither", `{"mcpServers": {"a": {"env": {}}}}`, `c.json:1:22: mcpServers.a: neither "command"`},
		{"stdio without command", `{"mcpServers": {"a": {"type": "stdio"}}}`, `mcpServers.a: a stdio server needs "command"`},
		{"http without url", `{"mcpServers": {"a": {"type": "http"}}}`, `mcpServers.a: an http server needs "url"`},
		{"mixed", `{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}`, `mcpServers.a: url does not belong to a stdio server`},
		{"http with args", `{"mcpServers": {"a": {"url": "http://h", "args": []}}}`, `mcpServers.a: args does not belong to a http server`},
		{"bad url", `{"mcpServers": {"a": {"url": "ftp://h/x"}}}`, `mcpServers.a.url: "ftp://h/x" is not an http:// or https:// URL`},
		{"url expand unset", `{"mcpServers": {"a": {"url": "${UNSET}"}}}`, `mcpServers.a.url: ${UNSET}: the variable UNSET is not set`},
		{"header expand unset", `{"mcpServers": {"a": {"url": "http://h", "headers": {"Authorization": "Bearer ${UNSET}"}}}}`, `mcpServers.a.headers.Authorization: ${UNSET}: the variable UNSET is not set`},
		{"trailing", `{"mcpServers": {}} {}`, `unexpected data after the top-level object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig("c.json", []byte(tc.src), env)
			if err == nil {
				t.Fatalf("accepted %s", tc.src)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestLoadConfigRefusesNonFiles: a FIFO or a directory is refused at once
// (never a hang), a missing file says so, a huge file is refused.
func TestLoadConfigRefusesNonFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, dir} {
		if _, err := LoadConfig(p); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("LoadConfig(%s) = %v, want not a regular file", p, err)
		}
	}
	if _, err := LoadConfig(filepath.Join(dir, "none.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, maxConfigBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: %v", err)
	}
	ok := filepath.Join(dir, "ok.json")
	if err := os.WriteFile(ok, []byte(`{"mcpServers": {"a": {"command": "x"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := LoadConfig(ok); err != nil || len(s) != 1 || s[0].File != ok {
		t.Errorf("LoadConfig(ok) = %+v, %v", s, err)
	}
}

// TestToolNames: the function-name charset (exactly [a-zA-Z0-9_-]), the 64-byte cap with a hash
// that keeps long names apart.
func TestToolNames(t *testing.T) {
	for _, tc := range []struct{ server, tool, want string }{
		{"everything", "get-env", "mcp__everything__get-env"},
		{"my.server", "read file", "mcp__my_server__read_file"},
		{"ünï", "tool/x", "mcp____n____tool_x"},
		// The ends of each kept range pass; the bytes just outside become '_'.
		{"azAZ09", "_-", "mcp__azAZ09___-"},
		{"`{@[", "/:", "mcp__________"},
	} {
		if got := ToolName(tc.server, tc.tool); got != tc.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", tc.server, tc.tool, got, tc.want)
		}
	}
	long1 := ToolName("server", strings.Repeat("t", 80)+"1")
	long2 := ToolName("server", strings.Repeat("t", 80)+"2")
	for _, n := range []string{long1, long2} {
		if len(n) != MaxNameLen || !validName(n) {
			t.Errorf("long name %q: %d bytes", n, len(n))
		}
	}
	if long1 == long2 {
		t.Errorf("two long names that differ at the end map to one: %s", long1)
	}
}

func validName(s string) bool { return s != "" && sanitize(s) == s }
