package kernel

import (
	"bytes"
	"testing"
	"time"
)

func stateOf(k *Kernel) []byte { return k.AppendState(nil, NewFirstSight()) }

// twoChildren: the root delegates to a and b; then the children act in the
// order given (each streams a text chunk and asks for a tool), so their
// ops, timers and call ids are numbered in that order.
func twoChildren(t *testing.T, order []string) *harness {
	h := newHarness(t, nil)
	h.submit("go")
	h.ask(Root, h.deleg("a", "task a"), h.deleg("b", "task b"))
	h.wait(time.Millisecond)
	for _, name := range order {
		h.text(h.id(name), "thinking ")
	}
	for _, name := range order {
		h.ask(h.id(name), h.call("grep", `{"p":"`+name+`"}`))
	}
	return h
}

// TestAppendStateCanonical: the same events to disjoint subtrees in either
// order reach one state, although ops, timers and call ids were numbered
// differently; a tool's result is another state.
func TestAppendStateCanonical(t *testing.T) {
	ab := twoChildren(t, []string{"a", "b"})
	ba := twoChildren(t, []string{"b", "a"})
	if ab.tool("call_3") == ba.tool("call_4") { // a's grep in both
		t.Fatal("the test must number the ops differently in the two orders")
	}
	if x, y := stateOf(ab.k), stateOf(ba.k); !bytes.Equal(x, y) {
		t.Fatalf("the two orders give different states:\n%x\n%x", x, y)
	}
	res := twoChildren(t, []string{"a", "b"})
	res.result("call_3", "found")
	if bytes.Equal(stateOf(ab.k), stateOf(res.k)) {
		t.Fatal("a tool result changed nothing in the encoding")
	}
}

// TestAppendStatePure: encoding a state changes nothing — a kernel encoded
// after every step and one never encoded answer the same events alike.
func TestAppendStatePure(t *testing.T) {
	seen := newHarness(t, nil)
	plain := newHarness(t, nil)
	var last []byte
	for _, h := range []*harness{seen, plain} {
		h.submit("go")
		if h == seen {
			last = stateOf(h.k)
			if !bytes.Equal(last, stateOf(h.k)) {
				t.Fatal("two encodings of one state differ")
			}
		}
		h.say(Root, "hello ")
		h.submit("again")
		h.wait(time.Second)
		h.do(CancelTurn(0, Root, 0))
		h.wait(5 * time.Second)
	}
	if !bytes.Equal(stateOf(seen.k), stateOf(plain.k)) {
		t.Fatal("encoding a state changed what the kernel did next")
	}
	if bytes.Equal(last, stateOf(seen.k)) {
		t.Fatal("a whole turn changed nothing in the encoding")
	}
}

// TestAppendStateSeesWhatARequestSent: how many messages a request sent is
// state while the request may still end on its own (its reported prompt
// size then becomes the estimate's base, "Compaction"), and is left out
// once it was cancelled, when nothing reads it: two states that differ
// only there are one.
func TestAppendStateSeesWhatARequestSent(t *testing.T) {
	h := newHarness(t, nil)
	h.submit("go")
	id := h.req(Root)
	base := stateOf(h.k)
	set := func(sent int, cancelling bool) []byte {
		o := h.k.ops[id]
		o.sent, o.cancelling = sent, cancelling
		h.k.ops[id] = o
		return stateOf(h.k)
	}
	n := h.k.ops[id].sent
	if bytes.Equal(set(n+1, false), base) {
		t.Fatal("a live request's sent count does not reach the encoding")
	}
	if !bytes.Equal(set(n+1, true), set(n, true)) {
		t.Fatal("a cancelled request's sent count, which nothing reads, splits states")
	}
}
