package scenario

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/kernel"
)

const approvalHead = `name: t
agents:
  main:
    - calls: [{tool: shell, args: {c: ls}, id: c1}]
tools:
  shell: {duration: 1s, result: r, approval: required}
  grep: {duration: 1s, result: r}
`

// TestApprovalFormat: a tool that asks is in the kernel's Ask; the
// decisions load into the verdict and digest they name, and survive the
// canonical round trip.
func TestApprovalFormat(t *testing.T) {
	src := approvalHead + `inputs:
  - {at: 0s, submit: go}
  - {at: 1s, approve: c1}
  - {at: 2s, approve: c1, for: args}
  - {at: 3s, approve: c1, for: tool, agent: main}
  - {at: 4s, deny: c1, note: "not that"}
  - {at: 5s, approve: c1, digest: wrong}
  - {at: 6s, deny: c1, digest: 0123456789012345}
`
	s, err := Load("a.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.KernelConfig().Ask; !slices.Equal(got, []string{"shell"}) {
		t.Fatalf("Ask = %q, want [shell]", got)
	}
	args := `{"c":"ls"}`
	for i, want := range []struct {
		v      kernel.Verdict
		digest string
	}{
		{kernel.VerdictApprove, kernel.Digest(args)},
		{kernel.VerdictApproveArgs, kernel.Digest(args)},
		{kernel.VerdictApproveTool, kernel.Digest(args)},
		{kernel.VerdictDeny, ""},
		{kernel.VerdictApprove, kernel.Digest(args + " ")},
		{kernel.VerdictDeny, "0123456789012345"},
	} {
		in := s.Inputs[i+1]
		call, v := in.Decision()
		if !in.IsDecision() || call != "c1" || v != want.v || in.DecisionDigest(args) != want.digest || in.DecisionAgent() != RootScript {
			t.Errorf("input %d: %s %s digest %q agent %q; want %s digest %q", i+1, call, v, in.DecisionDigest(args), in.DecisionAgent(), want.v, want.digest)
		}
	}
	back, err := Load("again.yaml", s.YAML())
	if err != nil || string(back.YAML()) != string(s.YAML()) {
		t.Fatalf("canonical round trip: %v\n%s", err, s.YAML())
	}
	plain, _ := Load("p.yaml", []byte(goodHead))
	if plain.KernelConfig().Ask != nil {
		t.Fatalf("a scenario whose tools ask nothing asks %q", plain.KernelConfig().Ask)
	}
}

// TestBadApprovals: a bad approval field names its line and what is wrong.
func TestBadApprovals(t *testing.T) {
	for _, tc := range []struct{ name, yaml, where, msg string }{
		{"bad approval", strings.Replace(approvalHead, "approval: required", "approval: maybe", 1), "bad.yaml:6:", `"maybe": the one value is "required"`},
		{"note on approval", approvalHead + "inputs:\n  - {at: 0s, approve: c1, note: hi}\n", "bad.yaml:9:", "only a denial carries a note"},
		{"grant on denial", approvalHead + "inputs:\n  - {at: 0s, deny: c1, for: tool}\n", "bad.yaml:9:", "only an approval grants"},
		{"bad grant", approvalHead + "inputs:\n  - {at: 0s, approve: c1, for: ever}\n", "bad.yaml:9:", `"ever": want args`},
		{"unknown agent", approvalHead + "inputs:\n  - {at: 0s, approve: c1, agent: ghost}\n", "bad.yaml:9:", `no script named "ghost"`},
		{"agent on a submission", approvalHead + "inputs:\n  - {at: 0s, submit: go, agent: main}\n", "bad.yaml:9:", "only a decision (approve or deny) has agent"},
		{"approve and deny", approvalHead + "inputs:\n  - {at: 0s, approve: c1, deny: c1}\n", "bad.yaml:9:", "exactly one of submit, interject, cancel, shutdown, approve, deny or compact"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("bad.yaml", []byte(tc.yaml))
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("want a *LoadError, got %v", err)
			}
			if !strings.HasPrefix(err.Error(), tc.where) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %q\nwant prefix %q containing %q", err, tc.where, tc.msg)
			}
		})
	}
}

// TestAskList: the ask list names tools besides those that declare
// approval, or all of them ("*" for the kernel); a tool it names or a
// script a decision names survives pruning, and an unknown name is bad
// input at its line.
func TestAskList(t *testing.T) {
	s, err := Load("a.yaml", []byte(approvalHead+"ask: [grep]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.KernelConfig().Ask; !slices.Equal(got, []string{"grep", "shell"}) {
		t.Fatalf("Ask = %q, want [grep shell]", got)
	}
	s.Ask = []string{AskAll}
	if got := s.KernelConfig().Ask; !slices.Equal(got, []string{"*"}) {
		t.Fatalf("Ask = %q, want [*]", got)
	}
	_, err = Load("bad.yaml", []byte(approvalHead+"ask: [hammer]\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "bad.yaml:8:") || !strings.Contains(err.Error(), `unknown tool "hammer"`) {
		t.Fatalf("an unknown tool in ask: %v", err)
	}
	p, err := Load("p.yaml", []byte("name: p\nagents:\n  main: [{text: hi}]\n  helper: [{text: h}]\ntools:\n  grep: {duration: 1s}\n  sed: {duration: 1s}\n"+
		"ask: [grep]\ninputs:\n  - {at: 0s, submit: go}\n  - {at: 1s, approve: c1, agent: helper}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := p.Pruned()
	if c == nil {
		t.Fatal("nothing pruned")
	}
	if _, ok := c.Tools["sed"]; ok {
		t.Fatal("an unused tool was kept")
	}
	if _, ok := c.Tools["grep"]; !ok {
		t.Fatal("the tool the ask list names was pruned")
	}
	if _, ok := c.Agents["helper"]; !ok {
		t.Fatal("the script a decision names was pruned")
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("pruned world is invalid: %v", err)
	}
}
