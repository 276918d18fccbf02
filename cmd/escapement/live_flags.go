package main

import (
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/escapement/escapement/adapters/config"
	"github.com/escapement/escapement/adapters/openai"
	toolproc "github.com/escapement/escapement/adapters/proc"
	"github.com/escapement/escapement/internal/headless"
	"github.com/escapement/escapement/kernel"
)

// What chat does with a line typed while a turn runs (--while-busy).
const (
	busyInterject = "interject"
	busyQueue     = "queue"
)

// liveFlags are the flags shared by run and chat.
type liveFlags struct {
	json       bool
	trace      string
	system     string
	session    string
	resume     string
	workspace  string
	allowShell bool
	toolEnv    []string // secret-looking variables passed to tools anyway
	ask        []string // --ask: tools whose calls wait for a person's approval
	chat       bool
	mcpConfigs []string // --mcp-config files
	model      string
	baseURL    string
	whileBusy  string // chat only; "" until resolved from stdin
	limits     kernel.Limits
	settings   headless.ModelSettings // what the root's requests ask of the model
	cfg        config.Flags           // --config, --trust-project, --profile, --api-key-env

	// The protocol and headless habits (docs/protocol.md, docs/cli.md).
	inputFormat string // text or json
	decide      bool   // run --json PROMPT: text stdin holds decision lines only (headless.StdinDecides)
	finalOnly   bool
	lastMessage string // -o FILE
}

func (f *liveFlags) register(cmd *cobra.Command, chat bool) {
	fl := cmd.Flags()
	f.chat = chat
	fl.BoolVar(&f.json, "json", false, "print lifecycle events as JSON Lines on stdout (for scripts) instead of the answer text")
	fl.StringVar(&f.trace, "trace", "", "write the kernel trace (JSON Lines, the kernel/trace format) to `FILE`")
	fl.StringVar(&f.system, "system", "", "system prompt of the root agent")
	fl.StringVar(&f.session, "session", "", "write the transcript to `FILE`, a new file (default: a new file under $XDG_STATE_HOME/escapement/sessions)")
	fl.StringVar(&f.resume, "resume", "", "continue the session in `FILE`, appending to it; a turn a crashed run left unfinished (its write-ahead log FILE.wal) is continued first")
	if chat {
		fl.StringVar(&f.whileBusy, "while-busy", "", "what a line typed while a turn runs does: interject (join the running turn) or queue (start the next turn after it); default interject when stdin is a terminal, queue otherwise")
	}
	fl.StringVar(&f.workspace, "workspace", ".", "directory the tools work in; paths that leave it are refused")
	fl.BoolVar(&f.allowShell, "allow-shell", false, "enable the shell tool (bash -c in the workspace, killed with its process group on cancel)")
	registerMCPFlags(fl, f)
	fl.StringArrayVar(&f.ask, "ask", nil, "calls of `TOOL` wait for a person's approval before they run; writes: write_file, shell and the MCP tools not annotated readOnlyHint; all: every tool; repeatable. chat on a terminal asks (y, n [note], a); --input-format json, chat --json and run --json PROMPT read approve and deny lines on stdin until it ends; else such a call is denied at once")
	fl.StringArrayVar(&f.toolEnv, "tool-env", nil, "pass the environment variable `NAME` to tools and MCP servers although it looks secret (a name containing KEY, SECRET, TOKEN, PASSWORD, PASSWD, PWD, CREDENTIAL, AUTH or the word PAT; a value that is a URL with a password); repeatable; never OPENAI_API_KEY")
	// The protocol and headless habits, together (docs/protocol.md).
	fl.StringVar(&f.inputFormat, "input-format", "text", "what stdin holds: text (chat: a line is a message, or with --json a decision line (approve or deny, docs/protocol.md); run: the prompt, when no PROMPT is given; with --json and PROMPT, decision lines only) or json (protocol input lines: messages, interjections, cancels, decisions; docs/protocol.md)")
	fl.BoolVar(&f.finalOnly, "final-only", false, "print only the final answer on stdout, once the turn has completed, instead of streaming every message of the turn")
	fl.StringVarP(&f.lastMessage, "output-last-message", "o", "", "write the last completed turn's final answer to `FILE` at the end (0600; a file already there is kept as FILE.~N~)")
	fl.StringVar(&f.model, "model", "gpt-4o-mini", "model name ($OPENAI_MODEL too, below $ESCAPEMENT_MODEL)")
	fl.StringVar(&f.baseURL, "base-url", openai.DefaultBaseURL, "OpenAI-compatible API root ($OPENAI_BASE_URL too, below $ESCAPEMENT_BASE_URL)")
	f.settings.Register(fl)
	f.cfg.Register(fl)
	headless.RegisterLimits(fl, &f.limits)
}

// configOptions: a file may set any flag of run and chat (docs/config.md).
func (a *app) configOptions(cmd *cobra.Command) config.Options {
	all := &cobra.Command{}
	(&liveFlags{}).register(all, true)
	return config.CLI(cmd.Flags(), a.err, all.Flags(), cmd.Root().PersistentFlags())
}

// validate names the flag of the first bad value.
func (f *liveFlags) validate() error {
	for _, spec := range kernel.LimitTable() {
		if err := spec.Check(spec.Get(f.limits)); err != nil {
			return usageErr("--%s %v", spec.Flag, err)
		}
	}
	if f.resume != "" && f.session != "" && f.session != f.resume {
		return usageErr("--session and --resume name different files; --resume appends to the file it resumes")
	}
	if err := (toolproc.EnvPolicy{Pass: f.toolEnv}).Validate(); err != nil {
		return usageErr("--tool-env: %v", err)
	}
	if f.trace != "" && (filepath.Clean(f.trace) == filepath.Clean(f.session) || filepath.Clean(f.trace) == filepath.Clean(f.resume)) {
		return usageErr("--trace and the session name the same file %s", f.trace)
	}
	switch f.whileBusy {
	case "", busyInterject, busyQueue:
	default:
		return usageErr("--while-busy %q: want interject or queue", f.whileBusy)
	}
	return f.validateHeadless()
}

// validateHeadless checks the protocol's and the headless habits' flags.
func (f *liveFlags) validateHeadless() error {
	switch {
	case f.inputFormat != "text" && f.inputFormat != "json":
		return usageErr("--input-format %q: want text or json", f.inputFormat)
	case f.finalOnly && f.json:
		return usageErr("--final-only and --json both say what stdout holds; the result event of --json has the final answer")
	case f.lastMessage != "" && slices.Contains([]string{filepath.Clean(f.session), filepath.Clean(f.resume), filepath.Clean(f.trace)}, filepath.Clean(f.lastMessage)):
		return usageErr("-o and the session or the trace name the same file %s", f.lastMessage)
	}
	return nil
}

func newRunCmd(a *app) *cobra.Command {
	f := &liveFlags{}
	cmd := &cobra.Command{
		Use:   "run [PROMPT | -]",
		Short: "Run one turn against an OpenAI-compatible endpoint",
		Long: `Run one turn of the root agent against an OpenAI-compatible endpoint:
the answer streams to stdout, tool and delegation activity to stderr. A turn
that does not complete says why on stderr (the HTTP status and the server's
message, a timeout, a cap).

Ctrl-C cancels the turn (streams and tools are cancelled, shells get SIGINT
then SIGKILL) and exits 130 once the whole tree has stopped; SIGTERM shuts
the tree down the same way (reason shutdown); a second signal exits at
once. The endpoint comes from --base-url or $OPENAI_BASE_URL, the key from
$OPENAI_API_KEY (never a flag, never logged).

--resume FILE continues the session in FILE; when the last run on it died
in the middle of a turn (its write-ahead log FILE.wal is left beside it),
that turn is continued first, and PROMPT (optional then) runs after it.
With - (or no PROMPT, no --resume and stdin not a terminal) the prompt is
read from stdin; with --json and PROMPT, stdin holds decision lines (approve,
deny) for calls that wait for approval (--ask) until it ends.

Exit codes: 0 completed, 1 the turn failed or timed out, 2 usage or input
error, 130 interrupted (of the last turn run), 141 stdout was closed.`,
		Example: `  OPENAI_BASE_URL=http://localhost:11434/v1 escapement run --model llama3.1 "list the Go files here"
  escapement run --allow-shell --workspace ./repo "run the tests and summarise failures"
  git diff | escapement run --final-only -o review.md "review this diff"
  escapement run --json "hello" | jq -r 'select(.type=="result") | .answer'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prompt, err := headless.Prompt(args, f.resume != "", f.inputFormat == "json", a.in, isTerminal(a.in))
			if err != nil {
				return usageErr("%v", err)
			}
			f.decide = headless.StdinDecides(args, f.json, f.inputFormat == "json")
			lr, err := a.setupLive(f)
			if err != nil {
				return err
			}
			return lr.runOnce(cmd.Context(), prompt)
		},
	}
	f.register(cmd, false)
	return cmd
}

func newChatCmd(a *app) *cobra.Command {
	f := &liveFlags{}
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "A headless REPL on stdin/stdout against an OpenAI-compatible endpoint",
		Long: `Chat with the root agent: each line on stdin is a message. A line typed
while a turn runs interjects (joins the running turn) or, with --while-busy
queue (the default when stdin is not a terminal), starts the next turn once
the running one has ended. A line holds at most 1 MiB: a longer one is
refused with a message naming it, the lines after it are read, and chat
exits 2 at the end (1 if stdin could not be read to its end).

Commands (a line whose first word starts with /, handled here, never sent):
` + chatHelp + `
Ctrl-C cancels the running turn and returns to the prompt; a second Ctrl-C
before the tree has stopped exits at once; Ctrl-D (end of input) exits after
the running turn and any queued lines; SIGTERM shuts the tree down (reason
shutdown) and exits 130.

The transcript is written to the session file as it happens and synced at
the end of every turn, and every event is logged before it acts in FILE.wal
(removed when chat ends cleanly). --resume FILE continues a session: when
the last run died in the middle of a turn (kill -9, a crash, a power cut),
that turn is rebuilt from FILE.wal and continued first — a streaming answer
is asked for again, read-only tools run again, any other tool call that was
running is reported to the model as tool_lost — and input is read after.`,
		Example: `  OPENAI_BASE_URL=http://localhost:8080/v1 escapement chat --session work.jsonl
  escapement chat --resume work.jsonl
  printf 'first\nsecond\n' | escapement chat      # two turns, one after the other`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lr, err := a.setupLive(f)
			if err != nil {
				return err
			}
			return lr.chat(cmd.Context())
		},
	}
	f.register(cmd, true)
	return cmd
}
