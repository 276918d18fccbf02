package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/escapement/escapement/adapters/config"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/adapters/tools"
	"github.com/escapement/escapement/internal/buildinfo"
	"github.com/escapement/escapement/internal/headless"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/internal/simcli"
	"github.com/escapement/escapement/internal/termtext"
)

// Exit codes, documented in docs/cli.md and in --help.
const (
	exitOK          = 0
	exitCheckFailed = 1
	exitUsage       = 2
	exitInterrupted = 130
	exitBrokenPipe  = 141 // stdout was closed: the run was shut down (128 + SIGPIPE)
)

// streams are the process's standard streams, injectable for tests.
type streams struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// exitError carries an exit code through cobra's error return.
type exitError = headless.ExitError

// usageErr marks bad flags, arguments or input files (exit 2).
func usageErr(format string, args ...any) error {
	return &exitError{Code: exitUsage, Err: fmt.Errorf(format, args...)}
}

// app is what every subcommand shares.
type app struct {
	streams
	logger    *log.Logger
	logLevel  string
	logFormat string
	// exit ends the process at once (a second Ctrl-C); signals subscribes
	// to interrupts for a command's lifetime (the returned func ends the
	// subscription). runWith injects both.
	exit    func(code int)
	signals func() (<-chan os.Signal, func())
	// catchPipe, when set (the process's own run), catches SIGPIPE while
	// a live command runs (the returned func stops it).
	catchPipe func() func()
	// newTools builds a live run's tools (nil: tools.New); tests inject
	// fakes (a tool that ignores its cancel).
	newTools func(tools.Config) (toolBox, error)
	// wrapSession, when set, wraps the session file's writes (tests inject
	// a disk that fills up).
	wrapSession func(io.Writer) io.Writer
	// wrapLog, when set, wraps the write-ahead log's writes (tests inject a
	// disk that fills up).
	wrapLog func(io.Writer) io.Writer
	// secrets redacts what the process must not print or write: the API key
	// (and any secret a command adds). Every error runWith prints passes it.
	secrets *redact.Redactor
	// session is the session a live command runs (adapters/session), its
	// lock held until the command has returned.
	session *session.Session
	cfg     *config.Config // where each flag's value came from, the profiles (adapters/config)
}

// run is main without os.Exit: the process's own hard exit and signals.
func run(ctx context.Context, args []string, s streams) int {
	return runWith(ctx, args, s, os.Exit, processSignals, func(a *app) { a.catchPipe = catchPipe })
}

// processSignals delivers SIGINT and SIGTERM until the returned func is
// called.
func processSignals() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	return ch, func() { signal.Stop(ch) }
}

// catchPipe catches SIGPIPE (and drops it) until the returned func is
// called, so a live run's write to a closed stdout fails with EPIPE — the
// run then shuts down (headless.Writer) — instead of killing the process
// mid-turn; a child's SIGPIPE stays its default.
func catchPipe() func() {
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE) // never read: a full channel drops the rest
	return func() { signal.Stop(pipe) }
}

// runWith is run with the process-wide effects injected: in-process tests
// pass an exit that does not end the test binary and a signal source they
// feed themselves, so they neither exit nor trap the binary's signals.
// opts adjust the app before the command runs (tests inject fakes).
func runWith(ctx context.Context, args []string, s streams, exit func(code int), signals func() (<-chan os.Signal, func()), opts ...func(*app)) int {
	a := &app{streams: s, exit: exit, signals: signals, secrets: redact.New(os.Getenv("OPENAI_API_KEY"))}
	for _, o := range opts {
		o(a)
	}
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	err := root.ExecuteContext(ctx)
	if a.session != nil {
		a.session.Release()
	}
	reportErr(s.err, a.secrets, err)
	return exitCodeOf(err)
}

// reportErr prints a command's error on stderr, redacted and with its
// control characters escaped: an error may quote anything — a flag's value,
// a server's answer, a line of a file (a write-ahead log's record that a
// rebuild did not reproduce) — and a secret in it must not reach the
// terminal.
func reportErr(w io.Writer, secrets *redact.Redactor, err error) {
	var ee *exitError
	var se *simcli.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ee.Err != nil {
			fmt.Fprintf(w, "escapement: %s\n", termtext.Text(secrets.Redact(ee.Err.Error())))
		}
	case errors.As(err, &se):
		if se.Err != nil {
			fmt.Fprintf(w, "escapement: %s\n", termtext.Text(secrets.Redact(se.Err.Error())))
		}
	default:
		fmt.Fprintf(w, "escapement: %s\nRun 'escapement --help' for usage.\n", termtext.Text(secrets.Redact(err.Error())))
	}
}

// exitCodeOf is the exit code a command's error gives: its own for an
// exitError, and a usage error for anything cobra itself reports (unknown
// command, bad flag, wrong number of arguments).
func exitCodeOf(err error) int {
	var ee *exitError
	var se *simcli.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &se):
		return se.Code
	}
	return exitUsage
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "escapement",
		Short: "A state-machine agent kernel with a deterministic simulator",
		Long: `escapement runs LLM agents as explicit state machines (Idle, Streaming,
Tooling, Delegating, Interrupted) that nest to any depth, can be cancelled or
interjected at any moment, and put a deadline on everything that waits.

The same pure kernel runs in a deterministic simulator (virtual time,
scripted models and tools, injected faults, an invariant oracle) and against
real OpenAI-compatible endpoints.

Exit codes: 0 ok, 1 a check failed, 2 usage or input error, 130 interrupted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) (err error) {
			if a.cfg, err = config.Resolve(cmd.Flags(), a.configOptions(cmd)); err != nil {
				return usageErr("%v", err)
			}
			return a.setupLogging()
		},
		Version: buildinfo.Version(),
	}
	root.SetVersionTemplate("escapement {{.Version}}\n")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "warn", "log level on stderr: debug, info, warn, error")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", "text", "log format on stderr: text, json, logfmt")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageErr("%v", err)
	})
	root.AddCommand(newFSMCmd(a), simcli.Command(a.simHost()), newRunCmd(a), newChatCmd(a), newConfigCmd(a), &cobra.Command{
		Use: "version", Short: "Print escapement's version, its event protocol's and the Go toolchain's", Args: cobra.NoArgs,
		// The version is asked for when something is wrong, a broken
		// configuration included: it reads none (as --version does not).
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(a.out, "escapement %s\nprotocol %d\n%s\n", buildinfo.Version(), protocol.Version, buildinfo.Platform())
		},
	})
	return root
}

// simHost is what the simulator's commands take from the process: its
// streams, its signals, the logger (set up before a command runs).
func (a *app) simHost() simcli.Host {
	return simcli.Host{Out: a.out, Err: a.err, Signals: a.signals, Build: "escapement",
		Debug: func(msg string, keyvals ...any) { a.logger.Debug(msg, keyvals...) }}
}

// setupLogging builds the charmbracelet logger on stderr and installs it as
// the slog handler for this process's edges (never the kernel's hot path).
// The logger never asks the terminal anything: given stderr itself, its
// styles would query the terminal's colours (OSC 10/11, a cursor position
// report) and wait up to 10 s for an answer a pseudo-terminal may never
// give. It writes through a wrapper no terminal library recognises, and
// colours, when stderr is a terminal, come from the environment alone
// (TERM, COLORTERM, NO_COLOR, CLICOLOR_FORCE).
func (a *app) setupLogging() error {
	lvl, err := log.ParseLevel(a.logLevel)
	if err != nil {
		return usageErr("--log-level: %v", err)
	}
	opts := log.Options{Level: lvl, ReportTimestamp: true, TimeFormat: time.RFC3339Nano, Prefix: "escapement"}
	switch strings.ToLower(a.logFormat) {
	case "text":
		opts.Formatter = log.TextFormatter
	case "json":
		opts.Formatter = log.JSONFormatter
	case "logfmt":
		opts.Formatter = log.LogfmtFormatter
	default:
		return usageErr("--log-format: unknown format %q (want text, json or logfmt)", a.logFormat)
	}
	a.logger = log.NewWithOptions(struct{ io.Writer }{a.err}, opts)
	if f, ok := a.err.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		a.logger.SetColorProfile(termenv.NewOutput(f).EnvColorProfile()) // the environment's answer: no query
	}
	return nil
}
