package mcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/escapement/escapement/adapters/proc"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// dialFunc makes a session's transport, recording in sess what a kill must
// stop (a process, a connection, HTTP requests).
type dialFunc func(ctx context.Context, sess *session) (sdk.Transport, error)

// dialStdio starts a stdio server through proc.Start: the leader of its own
// process group under a per-call subreaper helper (Linux), so killing it
// kills everything it started; its environment is escapement's through the
// tools' policy (no API key, no secret-looking variable unless named by
// --tool-env or the config's env, no variable any server's configuration
// expanded into a secret), plus the config's env.
func dialStdio(ctx context.Context, sess *session) (sdk.Transport, error) {
	srv := sess.srv
	cfg := srv.cfg
	cmd := exec.Command(cfg.Command, cfg.Args...)
	pass := slices.Clone(srv.c.opts.PassEnv)
	env := os.Environ()
	for _, k := range slices.Sorted(maps.Keys(cfg.Env)) {
		pass = append(pass, k)
		env = append(env, k+"="+cfg.Env[k])
	}
	cmd.Env = env
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	stdinR, stdinW, err1 := pipe()
	stdoutR, stdoutW, err2 := pipe()
	stderrR, stderrW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return nil, fmt.Errorf("pipes: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	// The process lives as long as the client (or until killed); the
	// start's ctx only bounds the handshake.
	path := cmd.Path // proc.Start runs the command through its helper
	policy := proc.EnvPolicy{Pass: pass, Withhold: srv.c.secretVars}
	p, err := proc.Start(srv.c.life, cmd, proc.Options{Env: policy, KillGrace: srv.c.opts.KillGrace})
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("start %s: %w%s", cfg.Command, err, notRunnable(path, err))
	}
	// The child has its own copies of its ends.
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()
	sess.proc, sess.stdin, sess.stdout = p, stdinW, &pipeReader{f: stdoutR}
	sess.stderr = newStderrTail(stderrR, func(line string) {
		srv.c.emit(Event{Kind: EventStderr, Server: cfg.Name, Message: line})
	})
	srv.wg.Go(sess.stderr.read)
	return &tapTransport{
		inner: &sdk.IOTransport{Reader: newStdoutFilter(sess.stdout, sess.tap, func(line string) {
			srv.c.emit(Event{Kind: EventStdoutNoise, Server: cfg.Name, Message: line})
		}), Writer: stdinW},
		tap: sess.tap,
		got: func(c *tapConn) { sess.conn = c },
	}, nil
}

// dialHTTP connects to a streamable HTTP server. Its requests go through a
// round tripper that adds the config's headers, shows the tap each message
// sent, and cuts every request when the session is killed.
func dialHTTP(ctx context.Context, sess *session) (sdk.Transport, error) {
	srv := sess.srv
	base := http.DefaultTransport
	if c := srv.c.opts.HTTPClient; c != nil && c.Transport != nil {
		base = c.Transport
	}
	kill, stop := context.WithCancel(context.Background())
	sess.httpStop = stop
	rt := &httpTap{base: base, headers: srv.cfg.Headers, scrub: headerSecrets(srv.cfg.Headers), tap: sess.tap, kill: kill, refused: sess.httpRefused,
		noise: func(line string) { srv.c.emit(Event{Kind: EventStdoutNoise, Server: srv.cfg.Name, Message: line}) }}
	return &sdk.StreamableClientTransport{
		Endpoint:   srv.cfg.URL,
		HTTPClient: &http.Client{Transport: rt},
		// A broken stream is resumed at most twice; a server that is gone
		// fails the session rather than being retried for half a minute.
		MaxRetries: 2,
		// eventBody bounds each event at maxMessageBytes before the SDK
		// reads it; the SDK's own bound stays behind it.
		MaxEventSize: 2 * maxMessageBytes,
	}, nil
}

// errCut is the error of an HTTP request made after its session was killed.
var errCut = errors.New("the MCP session was ended")

// httpTap is the HTTP sessions' round tripper.
type httpTap struct {
	base    http.RoundTripper
	headers map[string]string
	// scrub removes the headers' values from what a refusal quotes: a
	// server that answers 401 may echo the token it was sent.
	scrub *redact.Redactor
	tap   *tap
	kill  context.Context
	// refused receives each answer that is not a 2xx: its status and the
	// start of its body (the SDK's errors carry only the status text).
	refused func(string)
	// noise reports a server-sent event that was dropped (eventBody).
	noise func(string)
}

// headerSecrets is a redactor for the configured headers' values, each also
// without its scheme ("Bearer ghp_…" and "ghp_…").
func headerSecrets(headers map[string]string) *redact.Redactor {
	var secrets []string
	for _, v := range headers {
		secrets = append(secrets, v)
		if _, token, ok := strings.Cut(strings.TrimSpace(v), " "); ok {
			secrets = append(secrets, strings.TrimSpace(token))
		}
	}
	return redact.New(secrets...)
}

// refusalKeep bounds how much of a refusal's body is kept.
const refusalKeep = 300

func (h *httpTap) RoundTrip(req *http.Request) (*http.Response, error) {
	if h.kill.Err() != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errCut
	}
	ctx, cancel := context.WithCancel(req.Context())
	stopAfter := context.AfterFunc(h.kill, cancel)
	release := func() {
		stopAfter()
		cancel()
	}
	out := req.Clone(ctx)
	for k, v := range h.headers {
		out.Header.Set(k, v)
	}
	done := func(error) {}
	id := "" // the request's id, as JSON text, when it is one
	if req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			release()
			return nil, err
		}
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		if msg, err := jsonrpc.DecodeMessage(body); err == nil {
			done = h.tap.sending(msg)
			if r, ok := msg.(*jsonrpc.Request); ok && r.ID.IsValid() {
				id = idText(r.ID.Raw())
			}
		}
	}
	resp, err := h.base.RoundTrip(out)
	if err != nil {
		release()
		done(err)
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		done(fmt.Errorf("HTTP %s", resp.Status))
		// Keep the start of the body for the error, and hand the SDK the
		// whole body still.
		head := make([]byte, refusalKeep)
		n, _ := io.ReadFull(resp.Body, head)
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head[:n]), resp.Body), resp.Body}
		msg := "HTTP " + resp.Status
		if body := strings.Join(strings.Fields(string(textcut.TrimPartialEnd(head[:n]))), " "); body != "" {
			msg += ": " + body
		}
		if h.refused != nil && req.Method == http.MethodPost { // a 405 to the optional GET stream is normal
			h.refused(h.scrub.Redact(msg))
		}
	} else {
		done(nil)
		wrapAnswer(resp, id, h.tap, h.noise)
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// releasingBody releases its request's context when closed.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// stderrTail reads a stdio server's stderr: each line goes to the
// observer, and the last few hundred bytes are kept for the error that
// reports the server's end.
type stderrTail struct {
	r    *os.File
	line func(string)
	done chan struct{}

	mu   sync.Mutex
	last []string
	size int
}

// stderrKeep bounds the tail kept (bytes, about).
const stderrKeep = 400

func newStderrTail(r *os.File, line func(string)) *stderrTail {
	return &stderrTail{r: r, line: line, done: make(chan struct{})}
}

func (t *stderrTail) read() {
	defer close(t.done)
	defer t.r.Close()
	// Read to the end of the pipe, whatever a line's length: a reader
	// that stopped at a long line would leave the server to die of
	// SIGPIPE on its next write. What is kept of a line is bounded.
	br := bufio.NewReaderSize(t.r, 4096)
	var line []byte
	dropped := 0
	for {
		frag, more, err := br.ReadLine()
		if err != nil {
			if len(line) > 0 || dropped > 0 {
				// A last line without its newline whose length is a
				// multiple of the buffer's came only as fragments.
				t.take(line, dropped)
			}
			return
		}
		keep := min(len(frag), maxStderrLine-len(line))
		line = append(line, frag[:keep]...)
		dropped += len(frag) - keep
		if more {
			continue
		}
		t.take(line, dropped)
		line, dropped = line[:0], 0
	}
}

// maxStderrLine bounds what is kept of one stderr line; the rest of a
// longer one is counted and dropped.
const maxStderrLine = 64 << 10

// take records one whole stderr line.
func (t *stderrTail) take(b []byte, dropped int) {
	line := strings.TrimRight(string(b), "\r")
	if dropped > 0 {
		line += fmt.Sprintf(" … (%d more bytes)", dropped)
	}
	if line == "" {
		return
	}
	t.mu.Lock()
	t.last = append(t.last, line)
	t.size += len(line)
	for len(t.last) > 1 && t.size > stderrKeep {
		t.size -= len(t.last[0])
		t.last = t.last[1:]
	}
	t.mu.Unlock()
	t.line(line)
}

// finish waits for the reader to reach the end of the pipe: at once once
// every process holding it is gone (Linux kills them all); a process that
// escaped (macOS) cannot hold it open past wait.
func (t *stderrTail) finish(wait time.Duration) {
	if t == nil {
		return
	}
	_ = t.r.SetReadDeadline(time.Now().Add(wait))
	<-t.done
}

// tail is `; its stderr ended with: "…"`, or "" when it wrote nothing.
func (t *stderrTail) tail() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.last) == 0 {
		return ""
	}
	return fmt.Sprintf("; its stderr ended with: %q", textcut.Clip(strings.Join(t.last, " | "), stderrKeep))
}

// notRunnable says why a command the system refused to run cannot run, for
// the two refusals whose errno alone does not tell a user what to change
// ("permission denied", "exec format error"); "" otherwise.
func notRunnable(path string, err error) string {
	switch {
	case errors.Is(err, syscall.EACCES):
		fi, serr := os.Stat(path)
		switch {
		case serr != nil:
			return ""
		case fi.IsDir():
			return " (it is a directory, not a program)"
		case fi.Mode().Perm()&0o111 == 0:
			return fmt.Sprintf(" (it is not executable, mode %04o: make it executable, or name its interpreter as the command and the file in args)", fi.Mode().Perm())
		}
	case errors.Is(err, syscall.ENOEXEC):
		return " (not a program this system runs: a script needs a #! line naming its interpreter, or name the interpreter as the command and the file in args)"
	}
	return ""
}
