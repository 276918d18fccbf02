package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxNameLen is the longest tool name the model is offered: OpenAI's
// function names match ^[a-zA-Z0-9_-]{1,64}$.
const MaxNameLen = 64

// ToolName is the name the model sees for a server's tool: mcp__SERVER__TOOL,
// every byte outside [a-zA-Z0-9_-] replaced by '_'. A name longer than
// MaxNameLen is cut and ends in '_' and 8 hex digits of a hash of the
// server and tool names, so two long names that share a prefix stay apart.
// Different pairs can still map to one name ("a.b" and "a_b"); Start
// refuses such a collision.
func ToolName(server, tool string) string {
	name := "mcp__" + sanitize(server) + "__" + sanitize(tool)
	if len(name) <= MaxNameLen {
		return name
	}
	return hashedToolName(server, tool)
}

// hashedToolName is ToolName with the hash always added: the name of a
// tool whose plain name an earlier tool of the same server took ("get.file"
// after "get_file").
func hashedToolName(server, tool string) string {
	name := "mcp__" + sanitize(server) + "__" + sanitize(tool)
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	suffix := "_" + hex.EncodeToString(sum[:4])
	return name[:min(len(name), MaxNameLen-len(suffix))] + suffix
}

func sanitize(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// claim is one tool's claim on a model-facing name.
type claim struct {
	server *ServerConfig
	tool   string
}

func (c claim) String() string { return fmt.Sprintf("tool %q of %s", c.tool, c.server.where()) }

// CollisionError reports two server tools that map to one model-facing
// name.
type CollisionError struct {
	Name        string
	First, Then string // "tool "x" of MCP server "a" (file)"
}

func (e *CollisionError) Error() string {
	return fmt.Sprintf("MCP tool name %s is claimed twice: by %s and by %s; rename one of the servers in its configuration", e.Name, e.First, e.Then)
}
