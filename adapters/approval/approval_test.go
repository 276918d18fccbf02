package approval

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/kernel"
)

var runTools = []ports.ToolSpec{{Name: "read_file"}, {Name: "write_file"}, {Name: "shell"}, {Name: "mcp__fs__stat"}, {Name: "mcp__fs__rm"}, {Name: "delegate"}}

func TestResolve(t *testing.T) {
	ro := []string{"read_file", "mcp__fs__stat"}
	for _, c := range []struct {
		asks []string
		want []string
		err  string
	}{
		{asks: nil, want: nil},
		{asks: []string{"all"}, want: []string{"*"}},
		{asks: []string{"shell", "all"}, want: []string{"*"}},
		{asks: []string{"writes"}, want: []string{"write_file", "shell", "mcp__fs__rm"}},
		{asks: []string{"mcp__fs__stat", "shell", "shell"}, want: []string{"shell", "mcp__fs__stat"}},
		{asks: []string{"writes", "read_file"}, want: []string{"read_file", "write_file", "shell", "mcp__fs__rm"}},
		{asks: []string{"shel"}, err: `"shel" is no tool of this run; its tools are read_file, write_file, shell, mcp__fs__stat, mcp__fs__rm`},
		{asks: []string{"delegate"}, err: "never asks"},
	} {
		got, err := Resolve(c.asks, runTools, ro, "")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want %q", c.asks, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%v: %v %v, want %v", c.asks, got, err, c.want)
		}
	}
	if _, err := Resolve([]string{"shell"}, runTools[:2], nil, ""); err == nil || !strings.Contains(err.Error(), "--allow-shell") {
		t.Errorf("shell without --allow-shell: %v", err)
	}
}

func request(agent, call, tool string) protocol.Event {
	return protocol.Event{Type: protocol.TypeApprovalRequested, Agent: agent, CallID: call, Tool: tool, Arguments: `{"command":"make"}`, Digest: kernel.Digest(`{"command":"make"}`)}
}

func TestPromptAnswers(t *testing.T) {
	var out strings.Builder
	p := &Prompt{Err: &out}
	if _, ok, _ := p.Answer("y"); ok {
		t.Fatal("an answer with no call waiting")
	}
	p.Show(request("main", "c1", "shell"))
	if !strings.Contains(out.String(), "main wants to call shell") || !strings.Contains(out.String(), `{"command":"make"}`) {
		t.Errorf("question %q", out.String())
	}
	dg := kernel.Digest(`{"command":"make"}`)
	for line, want := range map[string]protocol.Input{
		"y":                         {Kind: protocol.InputApprove, Agent: "main", CallID: "c1", Digest: dg},
		" Yes ":                     {Kind: protocol.InputApprove, Agent: "main", CallID: "c1", Digest: dg},
		"a":                         {Kind: protocol.InputApprove, Agent: "main", CallID: "c1", Digest: dg, For: "tool"},
		"n":                         {Kind: protocol.InputDeny, Agent: "main", CallID: "c1", Digest: dg},
		"n  use make test instead ": {Kind: protocol.InputDeny, Agent: "main", CallID: "c1", Digest: dg, Note: "use make test instead"},
	} {
		in, ok, err := p.Answer(line)
		if !ok || err != nil || in != want {
			t.Errorf("%q: %+v %v %v, want %+v", line, in, ok, err, want)
		}
	}
	if _, ok, err := p.Answer("maybe"); !ok || !errors.Is(err, ErrAnswer) {
		t.Errorf("maybe: %v %v", ok, err)
	}
	if _, ok, _ := p.Answer("/cancel"); ok {
		t.Error("a command was read as an answer")
	}
}

// TestPromptQueue: calls are asked about one at a time, oldest first; a
// wait that ends (by any decision, an expiry, a withdrawal) lets the next
// be asked about.
func TestPromptQueue(t *testing.T) {
	var out strings.Builder
	p := &Prompt{Err: &out}
	p.Show(request("main", "c1", "shell"))
	p.Show(request("main/a", "c1", "write_file"))
	if strings.Count(out.String(), "approve?") != 1 || p.Waiting() != 2 {
		t.Fatalf("asked %q", out.String())
	}
	p.Show(protocol.Event{Type: protocol.TypeApprovalResolved, Agent: "main", CallID: "c1", Approval: "withdrawn"})
	if strings.Count(out.String(), "approve?") != 2 || !strings.Contains(out.String(), "main/a wants to call write_file") {
		t.Fatalf("asked %q", out.String())
	}
	in, _, _ := p.Answer("y")
	if in.Agent != "main/a" || in.CallID != "c1" {
		t.Errorf("answer went to %+v", in)
	}
	var nilPrompt *Prompt
	nilPrompt.Show(request("main", "c1", "shell"))
	if _, ok, _ := nilPrompt.Answer("y"); ok {
		t.Error("a nil prompt answered")
	}
}

func TestUnattended(t *testing.T) {
	var said []string
	pol := NewAttendance(false, func(s string) { said = append(said, s) }).Policy()
	d, ok := pol(live.ApprovalRequest{Approval: kernel.Approval{CallID: "c1", Tool: "shell"}, Path: "main"})
	if !ok || d.Verdict != kernel.VerdictDeny || d.Note != UnattendedNote {
		t.Fatalf("decision %+v %v", d, ok)
	}
	if len(said) != 1 || !strings.Contains(said[0], "main's call c1 of shell") {
		t.Errorf("said %q", said)
	}
}

// fakeDecider lists one waiting call and records the decisions.
type fakeDecider struct {
	waits   []live.ApprovalRequest
	decided []string
}

func (f *fakeDecider) Approvals(context.Context) ([]live.ApprovalRequest, error) { return f.waits, nil }

func (f *fakeDecider) Decide(_ context.Context, _ kernel.AgentID, callID, _ string, v kernel.Verdict, note string) error {
	f.decided = append(f.decided, callID+" "+v.String()+" "+note)
	return nil
}

// TestLeave: while someone attends, calls wait; once the input ends, the
// waiting calls are denied and later requests too.
func TestLeave(t *testing.T) {
	var said []string
	a := NewAttendance(true, func(s string) { said = append(said, s) })
	req := live.ApprovalRequest{Approval: kernel.Approval{CallID: "c1", Tool: "shell"}, Path: "main"}
	if _, ok := a.Policy()(req); ok {
		t.Fatal("an attended run decided by itself")
	}
	f := &fakeDecider{waits: []live.ApprovalRequest{req}}
	a.Leave(t.Context(), f)
	a.Leave(t.Context(), f)
	if want := []string{"c1 deny " + UnattendedNote}; !slices.Equal(f.decided, want) {
		t.Errorf("decided %q, want %q (once)", f.decided, want)
	}
	if d, ok := a.Policy()(req); !ok || d.Verdict != kernel.VerdictDeny {
		t.Errorf("after the input ended: %+v %v", d, ok)
	}
	if len(said) != 2 || !strings.Contains(said[0], "input ended") {
		t.Errorf("said %q", said)
	}
}

// TestPromptRedacts: the question quotes the model's arguments on the
// terminal; a secret in them (whole, or cut where the arguments are
// clipped) never reaches it.
func TestPromptRedacts(t *testing.T) {
	const key = "sk-Secret0123456789abcdefXYZ"
	red := redact.New(key)
	for _, args := range []string{
		`{"command":"curl -H 'Authorization: Bearer ` + key + `'"}`,
		`{"command":"` + strings.Repeat("x", argsShown-24) + key + `"}`,
	} {
		var out strings.Builder
		p := NewPrompt(true, &out, red.Redact)
		ev := request("main", "c1", "shell")
		ev.Arguments, ev.Digest = args, kernel.Digest(args)
		p.Show(ev)
		if !strings.Contains(out.String(), "main wants to call shell") || strings.Contains(out.String(), key[:redact.MinRun]) {
			t.Errorf("question %q", out.String())
		}
	}
}
