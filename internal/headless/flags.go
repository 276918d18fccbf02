package headless

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/pflag"

	"github.com/escapement/escapement/adapters/mcp"
	"github.com/escapement/escapement/kernel"
)

// RegisterLimits sets *l to the kernel's default limits and adds one flag
// per limit (kernel.LimitTable, docs/semantics.md), so every command line
// that runs a tree offers the same limits under the same names.
func RegisterLimits(fl *pflag.FlagSet, l *kernel.Limits) {
	*l = kernel.DefaultLimits()
	for _, spec := range kernel.LimitTable() {
		if p := spec.DurationPtr(l); p != nil {
			fl.DurationVar(p, spec.Flag, *p, spec.Usage)
		} else {
			p := spec.IntPtr(l)
			fl.IntVar(p, spec.Flag, *p, spec.Usage)
		}
	}
}

// LoadMCP reads the servers of every --mcp-config file (docs/mcp.md). A
// file that does not parse, or names no server, is an error naming it;
// callers report it as a usage error (exit 2).
func LoadMCP(paths []string) ([]mcp.ServerConfig, error) {
	var servers []mcp.ServerConfig
	for _, path := range paths {
		s, err := mcp.LoadConfig(path)
		if err != nil {
			return nil, fmt.Errorf("--mcp-config: %w", err)
		}
		if len(s) == 0 {
			return nil, fmt.Errorf("--mcp-config %s: no servers under \"mcpServers\"", path)
		}
		servers = append(servers, s...)
	}
	return servers, nil
}

// commandRE is a line chat handles itself: a slash, a word, then the rest.
// Other lines that start with a slash ("/usr/lib is missing") are messages.
var commandRE = regexp.MustCompile(`^/([A-Za-z][A-Za-z0-9_-]*)(?:\s+(.*))?$`)

// ChatCommand splits a chat line "/name arg" into its command and its
// trimmed argument; ok is false for a line that is a message (docs/cli.md).
func ChatCommand(line string) (name, arg string, ok bool) {
	m := commandRE.FindStringSubmatch(line)
	if m == nil {
		return "", "", false
	}
	return m[1], strings.TrimSpace(m[2]), true
}
