package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/fakeopenai"
)

// treeServer answers a run that lists the workspace and delegates in one
// message ("Let me look."), whose helper reads a file that is not there,
// then answers; the root then answers "All done.". Every request ends
// with usage (10 prompt tokens).
func treeServer(t *testing.T) *fakeopenai.Server {
	return endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		last := r.Body.Last()
		switch {
		case r.Body.FirstUser() == "find it" && last.Role == "user":
			_ = w.Call(0, "h1", "read_file", `{"path":"missing.txt"}`, 4)
			_ = w.End("tool_calls")
		case r.Body.FirstUser() == "find it":
			_ = w.Answer("not there", 3)
		case last.Role == "user":
			_ = w.Text("Let me look.")
			_ = w.Call(0, "c1", "list_dir", `{"path":"."}`, 4)
			_ = w.Call(1, "c2", "delegate", `{"task":"find it","name":"helper"}`, 4)
			_ = w.End("tool_calls")
		default:
			_ = w.Answer("All done.", 3)
		}
	})
}

// TestJSONIsTheProtocol: `run --json` prints the protocol
// (docs/protocol.md), every line valid against its schema: a started
// event saying what runs, the transitions with every field (from Idle, on
// Submit), the calls with their arguments and results (the helper's
// failed read with its reason), no -1 for "no child", each request's
// usage and each turn's total (the helper's inside the root's), and a
// result with the outcome, the answer, the totals, the session and how to
// resume it. (The lines of the kernel dump --json printed before have no
// type and fail the schema.)
func TestJSONIsTheProtocol(t *testing.T) {
	srv := treeServer(t)
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	code, out, errb := runCLI(t, "run", "look", "--json", "--model", "m1", "--session", sess, "--workspace", dir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb)
	}
	evs := jsonRun(t, out)
	st := evs[0]
	ws, _ := filepath.EvalSymlinks(dir)
	if st.Protocol != protocol.Version || st.Model != "m1" || st.Endpoint != srv.BaseURL() || st.Session != sess || st.Resumed ||
		(st.Workspace != dir && st.Workspace != ws) || !slices.Contains(st.Tools, "list_dir") || !slices.Contains(st.Tools, "delegate") || st.Limits["grace_ms"] != 2000 || st.Limits["max_depth"] != 8 {
		t.Errorf("started %+v", st)
	}
	if strings.Contains(out, `"child":-1`) || strings.Contains(out, `"kind"`) {
		t.Errorf("kernel dump fields in the protocol:\n%s", out)
	}
	if tr, _ := firstOf(evs, protocol.TypeTransition, "main"); tr.From != "Idle" || tr.Trigger != "Submit" || tr.To != "Streaming" {
		t.Errorf("the root's first transition %+v", tr)
	}
	if ts, _ := firstOf(evs, protocol.TypeToolStarted, "main"); ts.Tool != "list_dir" || ts.Arguments != `{"path":"."}` || ts.CallID != "c1" {
		t.Errorf("tool_started %+v", ts)
	}
	failed, _ := lastOf(evs, protocol.TypeCallFinished, "main/helper")
	if failed.Tool != "read_file" || failed.Status != "error" || failed.Reason != "tool_error" || !strings.Contains(failed.Result, "missing.txt") || failed.Child != "" {
		t.Errorf("the helper's read %+v", failed)
	}
	if dl, _ := firstOf(evs, protocol.TypeDelegated, "main"); dl.Child != "main/helper" || dl.Task != "find it" || dl.CallID != "c2" {
		t.Errorf("delegated %+v", dl)
	}
	var withUsage int
	for _, ev := range evs {
		if ev.Type == protocol.TypeOpEnded && ev.OpKind == protocol.OpRequest && ev.Usage != nil && ev.Usage.PromptTokens == 10 && ev.Usage.Requests == 1 {
			withUsage++
		}
	}
	helper, _ := lastOf(evs, protocol.TypeTurnEnded, "main/helper")
	root, _ := lastOf(evs, protocol.TypeTurnEnded, "main")
	want := protocol.Usage{PromptTokens: 40, CompletionTokens: root.Usage.CompletionTokens, Requests: 4}
	if withUsage != 4 || helper.Usage.Requests != 2 || helper.Usage.PromptTokens != 20 || *root.Usage != want || root.Usage.CompletionTokens < helper.Usage.CompletionTokens {
		t.Errorf("usage: %d request ends with it; the helper's turn %+v, the root's %+v", withUsage, helper.Usage, root.Usage)
	}
	res := evs[len(evs)-1]
	if res.Outcome != "completed" || res.Reason != "" || res.Answer != "All done." || res.Turns != 1 || res.Requests != 4 || *res.Usage != want ||
		res.Session != sess || res.Resume != "escapement run --resume "+sess {
		t.Errorf("result %+v", res)
	}
}

// firstOf is the first event of type typ of the agent at path.
func firstOf(evs []protocol.Event, typ, path string) (protocol.Event, bool) {
	for _, ev := range evs {
		if ev.Type == typ && ev.Agent == path {
			return ev, true
		}
	}
	return protocol.Event{}, false
}

// TestActivityShowsWhy: without --json, the messages of the root's turn
// are on lines of their own ("Let me look." and the answer were glued
// together), a failed tool's line says why, and run ends by saying how to
// continue the session.
func TestActivityShowsWhy(t *testing.T) {
	treeServer(t)
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	code, out, errb := runCLI(t, "run", "look", "--session", sess, "--workspace", dir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb)
	}
	if out != "Let me look.\nAll done.\n" {
		t.Errorf("stdout %q", out)
	}
	mustHave(t, errb, "[main/helper] ← read_file error: missing.txt: no such file or directory\n",
		"[main] ← list_dir ok\n", "[main] ← main/helper: completed\n",
		"escapement: continue this session with: escapement run --resume "+sess+` "…"`+"\n")
}

// TestShellExitShown: a shell command's exit status is on its activity
// line (the call is ok — the model reads the status — and it said only
// "ok").
func TestShellExitShown(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("ran", 3)
			return
		}
		_ = w.Call(0, "s1", "shell", `{"command":"echo hi; exit 3"}`, 8)
		_ = w.Call(1, "s2", "shell", `{"command":"true"}`, 8)
		_ = w.End("tool_calls")
	})
	dir := t.TempDir()
	code, _, errb := runCLI(t, "run", "go", "--allow-shell", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb)
	}
	mustHave(t, errb, "[main] ← shell exit 3\n", "[main] ← shell ok\n")
}

// TestInputFormatJSON: chat --input-format json acts on each protocol
// input line in order — a message starts a turn, a queued one the next —
// and refuses the others by number, on stderr and as error events, reading
// on; it exits 2, never 0, for input it did not act on.
func TestInputFormatJSON(t *testing.T) {
	srv := endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("re: "+r.Body.Last().Content, 4)
	})
	dir := t.TempDir()
	input := strings.Join([]string{
		`{"message":"first"}`,
		`not json`,
		`{"queue":"second"}`,
		``,
		`{"approve":"c1","digest":"0123456789abcdef"}`,
		`{"cancel":"main/nobody"}`,
		`{"message":"third","agent":"main"}`,
	}, "\n") + "\n"
	code, out, errb := runCLIWithInput(t, input, "chat", "--input-format", "json", "--json", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir)
	if code != exitUsage {
		t.Errorf("exit %d, want 2\n%s", code, errb)
	}
	evs := jsonRun(t, out)
	var errLines []int
	for _, ev := range evs {
		if ev.Type == protocol.TypeError && ev.Source == protocol.SourceInput {
			errLines = append(errLines, ev.Line)
		}
	}
	if !slices.Equal(errLines, []int{2, 5, 6, 7}) {
		t.Errorf("error events for lines %v, want 2 5 6 7", errLines)
	}
	for _, n := range []string{"2", "5", "6", "7"} {
		if !strings.Contains(errb, "escapement: stdin line "+n+": ") {
			t.Errorf("stderr does not name line %s:\n%s", n, errb)
		}
	}
	var users []string
	for _, r := range srv.Requests() {
		users = append(users, r.Body.Last().Content)
	}
	if !slices.Equal(users, []string{"first", "second"}) {
		t.Errorf("the model got %q, want first and second", users)
	}
	if res := evs[len(evs)-1]; res.Turns != 2 || res.Answer != "re: second" {
		t.Errorf("result %+v", res)
	}
	if strings.Contains(errb, "> ") {
		t.Errorf("a prompt on stderr with protocol input:\n%s", errb)
	}
}

// TestRunInputJSON: run --input-format json takes its prompt from the
// first message; an interjection joins the running turn (the next request
// has it), a cancel interrupts it (exit 130); stdin that ends with no
// message is a usage error, not a quiet success.
func TestRunInputJSON(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Content == "stop at 3" {
			_ = w.Answer("1 2 3", 2)
			return
		}
		w.Forever(ctx, "tok ", 10*time.Millisecond)
	})
	dir := t.TempDir()
	c := startCLI(t, []string{"run", "--input-format", "json", "--json", "--session", filepath.Join(dir, "a.jsonl"), "--workspace", dir})
	c.say(`{"message":"count"}`)
	eventually(t, "the stream", func() bool { return strings.Count(c.out.String(), `"type":"delta"`) >= 2 })
	c.say(`{"interject":"stop at 3"}`)
	if code := c.wait(20 * time.Second); code != exitOK {
		t.Fatalf("interjected run: exit %d\n%s", code, c.errb)
	}
	evs := jsonRun(t, c.out.String())
	if ij, ok := lastOf(evs, protocol.TypeInterjected, "main"); !ok || ij.Text != "stop at 3" {
		t.Errorf("interjected %+v", ij)
	}
	if res := evs[len(evs)-1]; res.Outcome != "completed" || !strings.HasSuffix(res.Answer, "1 2 3") {
		t.Errorf("result %+v", res)
	}

	c = startCLI(t, []string{"run", "--input-format", "json", "--json", "--session", filepath.Join(dir, "b.jsonl"), "--workspace", dir})
	c.say(`{"message":"count"}`)
	eventually(t, "the stream", func() bool { return strings.Count(c.out.String(), `"type":"delta"`) >= 2 })
	c.say(`{"cancel":true}`)
	if code := c.wait(20 * time.Second); code != exitInterrupted {
		t.Fatalf("cancelled run: exit %d\n%s", code, c.errb)
	}
	if res := jsonRun(t, c.out.String()); res[len(res)-1].Reason != "user_cancel" {
		t.Errorf("result %+v", res[len(res)-1])
	}

	code, out, errb := runCLIWithInput(t, "\n", "run", "--input-format", "json", "--json", "--session", filepath.Join(dir, "c.jsonl"), "--workspace", dir)
	if code != exitUsage || !strings.Contains(errb, "stdin ended without a message") {
		t.Errorf("no message: exit %d\n%s", code, errb)
	}
	jsonRun(t, out)
}

// requireJQ makes TestREADMEConsumer fail instead of skipping without jq.
const requireJQ = "ESCAPEMENT_REQUIRE_JQ"

// TestREADMEConsumer: the example consumer the README and docs/protocol.md
// show — escapement run --json piped into jq — prints the outcome and the
// answer, run as a user would (the binary on PATH, sh, jq).
// Without jq it is skipped, unless requireJQ is set (CI sets it and
// installs jq, so the README's example is run there).
func TestREADMEConsumer(t *testing.T) {
	jq, err := exec.LookPath("jq")
	if err != nil && os.Getenv(requireJQ) != "" {
		t.Fatalf("jq is not installed and %s is set", requireJQ)
	}
	if err != nil {
		t.Skip("jq is not installed")
	}
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("main.go and util.go", 4)
	})
	t.Cleanup(srv.Close)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- consumer:begin[^>]*-->\n```sh\n(.*?)```\n<!-- consumer:end -->").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no example consumer between <!-- consumer:begin --> and <!-- consumer:end -->")
	}
	doc, _ := os.ReadFile("../../docs/protocol.md")
	if !strings.Contains(string(doc), string(m[1])) {
		t.Errorf("docs/protocol.md does not show the README's consumer:\n%s", m[1])
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", string(m[1]))
	cmd.Dir = dir
	cmd.Env = binEnv(dir, "PATH="+filepath.Dir(bin)+":"+filepath.Dir(jq)+":/usr/bin:/bin", "OPENAI_BASE_URL="+srv.BaseURL())
	out, err := cmd.Output()
	if err != nil || !regexp.MustCompile(`^completed: main.go and util.go \(10\+\d+ tokens\)\n`).Match(out) {
		t.Errorf("the consumer printed %q (%v)", out, err)
	}
}
