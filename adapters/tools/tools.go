// Package tools is escapement's real tool set for a coding agent: files
// confined to a workspace directory, grep, and (only when allowed) a shell
// whose whole process group is interrupted and then killed on cancel (F3),
// started through adapters/proc so that nothing it starts outlives the call
// and no secret from the environment reaches it.
//
// Confinement rests on os.Root: every file operation resolves inside the
// workspace, and a path that leaves it — through "..", an absolute path
// elsewhere, or a symlink pointing out — is refused with a tool error that
// says which. Tool failures are results for the model (kernel.ToolError),
// never panics or process exits.
//
// A Box offers read_file, write_file, list_dir and grep, shell when
// Config.AllowShell is set, and the schema of the kernel's delegation tool
// (ports.DelegateSpec), which the kernel runs itself; Specs has each one's JSON
// Schema. adapters/toolset combines a Box with MCP servers and Go functions.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/proc"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// Config configures a Box.
type Config struct {
	// Workspace is the directory the tools may touch (required, must exist).
	Workspace string
	// AllowShell enables the shell tool. Off by default: a shell can reach
	// anything the user can, so it must be asked for (--allow-shell).
	AllowShell bool
	// PassEnv names environment variables the shell gets although they
	// look secret (proc.Secret, proc.SecretValue); every other such
	// variable, and always OPENAI_API_KEY, is withheld.
	// New refuses OPENAI_API_KEY here.
	PassEnv []string
	// WithholdEnv names variables the shell does not get although nothing
	// about them looks secret (proc.EnvPolicy.Withhold: the CLI's MCP
	// configurations' expanded variables).
	WithholdEnv []string
	// KillGrace is how long a cancelled shell's process group has between
	// SIGINT and SIGKILL. Keep it below the kernel's grace so the group is
	// gone before the kernel abandons the call (the CLI uses half of it);
	// 1s when 0.
	KillGrace time.Duration
	// OutputLimit caps the bytes of one result (file content, shell output,
	// listings); 64 KiB when 0.
	OutputLimit int
	// DrainLimit bounds how long a finished shell's output pipe is drained
	// when a process that escaped the group still holds it; 2s when 0.
	DrainLimit time.Duration
	// DelegateTool is the kernel's delegation tool name, published in Specs
	// but never run here; "delegate" when empty.
	DelegateTool string
}

// Box is the tool set for one workspace. It implements ports.Tools and is
// safe for concurrent use (tool calls run in parallel).
type Box struct {
	cfg  Config
	dir  string // absolute workspace path as given
	real string // the same with symlinks resolved
	root *os.Root

	env proc.EnvPolicy // the shell's environment policy

	// grepOpenHook, when a test sets it, runs between grep's walk seeing a
	// file and opening it: the window in which the file can be swapped.
	grepOpenHook func(name string)

	mu        sync.Mutex
	running   map[*proc.Process]struct{} // running shells
	killedAll bool                       // KillAll ran: every shell is killed as it starts
}

// New opens the workspace. It refuses a workspace the file tools must not
// expose — the filesystem root (it holds /proc/self/environ, this process's
// environment) and anything under /proc, /sys or /dev — and a PassEnv that
// would pass the API key. Close the Box when done.
func New(cfg Config) (*Box, error) {
	if cfg.Workspace == "" {
		return nil, errors.New("tools: workspace is required")
	}
	env := proc.EnvPolicy{Pass: cfg.PassEnv, Withhold: cfg.WithholdEnv}
	if err := env.Validate(); err != nil {
		return nil, fmt.Errorf("tool environment: %w", err)
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = time.Second
	}
	if cfg.OutputLimit <= 0 {
		cfg.OutputLimit = 64 << 10
	}
	if cfg.DrainLimit <= 0 {
		cfg.DrainLimit = 2 * time.Second
	}
	if cfg.DelegateTool == "" {
		cfg.DelegateTool = "delegate"
	}
	dir, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", cfg.Workspace, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", cfg.Workspace, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", cfg.Workspace, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("workspace %s: not a directory", cfg.Workspace)
	}
	if why := sensitiveRoot(real); why != "" {
		return nil, fmt.Errorf("workspace %s: refused: %s; choose a project directory", cfg.Workspace, why)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", cfg.Workspace, err)
	}
	return &Box{cfg: cfg, dir: dir, real: real, root: root, env: env, running: make(map[*proc.Process]struct{})}, nil
}

// sensitiveRoot says why a workspace (its resolved absolute path) is
// refused, or "" when it is not: the filesystem root, because it holds
// /proc/self/environ (this process's environment, API key included), and
// the kernel's pseudo-filesystems /proc, /sys and /dev and everything under
// them, which hold other processes' environments and memory, kernel state
// and devices — never a project. Any other directory is the user's choice,
// home included: the tools are confined to it, not to a guess at what in it
// is sensitive.
func sensitiveRoot(real string) string {
	if real == "/" {
		return "the filesystem root would expose every file the user can read to the file tools, on Linux /proc/self/environ too (this process's environment, the API key included)"
	}
	for _, tree := range []string{"/proc", "/sys", "/dev"} {
		if real == tree || strings.HasPrefix(real, tree+"/") {
			return tree + " is a kernel pseudo-filesystem (process environments and memory, kernel state, devices), not a project"
		}
	}
	return ""
}

// Close releases the workspace handle.
func (b *Box) Close() error { return b.root.Close() }

// Workspace is the workspace's absolute path (symlinks resolved).
func (b *Box) Workspace() string { return b.real }

// Run executes one call; unknown tools and bad arguments are error results.
func (b *Box) Run(ctx context.Context, call ports.Call) ports.ToolResult {
	var (
		content string
		err     error
	)
	switch call.Name {
	case "read_file":
		var a struct{ Path *string }
		if err = decode(call, &a, func() bool { return a.Path == nil }, `{"path": string}`); err == nil {
			content, err = b.readFile(*a.Path)
		}
	case "write_file":
		var a struct{ Path, Content *string }
		if err = decode(call, &a, func() bool { return a.Path == nil || a.Content == nil }, `{"path": string, "content": string}`); err == nil {
			content, err = b.writeFile(*a.Path, *a.Content)
		}
	case "list_dir":
		var a struct{ Path string }
		if err = decode(call, &a, func() bool { return false }, `{"path": string}`); err == nil {
			content, err = b.listDir(a.Path)
		}
	case "grep":
		var a struct {
			Pattern *string
			Path    string
		}
		if err = decode(call, &a, func() bool { return a.Pattern == nil }, `{"pattern": string, "path": string}`); err == nil {
			content, err = b.grep(ctx, *a.Pattern, a.Path)
		}
	case "shell":
		if !b.cfg.AllowShell {
			err = errors.New("shell is disabled; the user can enable it with --allow-shell")
			break
		}
		var a struct{ Command *string }
		if err = decode(call, &a, func() bool { return a.Command == nil || strings.TrimSpace(*a.Command) == "" }, `{"command": string}`); err == nil {
			return b.shell(ctx, *a.Command)
		}
	default:
		err = fmt.Errorf("unknown tool %q (available: %s)", call.Name, strings.Join(b.names(), ", "))
	}
	if err != nil {
		return ports.ToolResult{Status: kernel.ToolError, Content: "error: " + call.Name + ": " + err.Error()}
	}
	return ports.ToolResult{Status: kernel.ToolOK, Content: content}
}

// decode parses a call's JSON arguments into dst; missing reports whether a
// required field is absent. Unknown fields are ignored (models add them).
func decode(call ports.Call, dst any, missing func() bool, shape string) error {
	if err := json.Unmarshal([]byte(call.Arguments), dst); err != nil {
		return fmt.Errorf("arguments must be %s: %v", shape, err)
	}
	if missing() {
		return fmt.Errorf("arguments must be %s; got %s", shape, textcut.Clip(call.Arguments, 200))
	}
	return nil
}

// escapeError is a path the model asked for that lies outside the workspace.
type escapeError struct {
	Path string
	How  string // "..", "absolute path", "symlink"
}

func (e *escapeError) Error() string {
	return fmt.Sprintf("refused: path %q leaves the workspace (%s); paths are relative to the workspace root", e.Path, e.How)
}

// rel turns a path from the model into a clean path relative to the
// workspace, refusing ".." escapes and absolute paths elsewhere. Symlinks are
// checked by os.Root when the path is used (see fsErr).
func (b *Box) rel(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if filepath.IsAbs(p) {
		clean := filepath.Clean(p)
		for _, base := range []string{b.real, b.dir} {
			if r, err := filepath.Rel(base, clean); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
				return r, nil
			}
		}
		return "", &escapeError{Path: p, How: "absolute path"}
	}
	clean := filepath.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", &escapeError{Path: p, How: ".."}
	}
	return clean, nil
}

// fsErr rewrites os.Root's escape error (a symlink pointing out of the
// workspace) into an escapeError, and strips the workspace's absolute path
// from other errors (the model works with relative paths).
func (b *Box) fsErr(p string, err error) error {
	if err == nil {
		return nil
	}
	if strings.Contains(err.Error(), "path escapes from parent") {
		return &escapeError{Path: p, How: "symlink"}
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", p, pe.Err)
	}
	return err
}
