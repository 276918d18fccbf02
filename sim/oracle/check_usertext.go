package oracle

import (
	"slices"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// userTextChecker holds I10 (F7, F8): what the user typed appears in the
// root's history exactly as often as the kernel accepted it — an
// interjection right after the partial text it cut — and text a stream
// delivered before a cut, a failure or its output limit is kept as a
// partial message in that step.
type userTextChecker struct {
	judge
	// given counts each accepted user text; seen counts it in the root's
	// history (markers aside).
	given, seen map[string]int
	// excused counts, per text, the accepted copies a shutdown discarded:
	// those next held when it came — inputs accepted while the root was
	// Interrupted, for a next turn that had not started. An interjection
	// queued into a running turn is not among them: the shutdown's abort
	// writes it into the turn (docs/semantics.md, "Inputs").
	excused map[string]int
	next    map[string]int
	interjs []interjObs
}

type interjObs struct {
	text    string
	partial string // the text it cut ("" when it cut none)
	seen    bool
}

func newUserTextChecker(j judge) *userTextChecker {
	return &userTextChecker{judge: j, given: map[string]int{}, seen: map[string]int{}, excused: map[string]int{}, next: map[string]int{}}
}

func (c *userTextChecker) step(s *stepObs) {
	if (s.is(kernel.EvSubmit) || s.is(kernel.EvInterject)) && !s.rejected {
		c.given[s.ev.Text]++
		if s.rootWas == fsm.Interrupted {
			c.next[s.ev.Text]++
		}
		if s.ev.Kind == kernel.EvInterject {
			c.interjs = append(c.interjs, interjObs{text: s.ev.Text, partial: s.rootCut})
		}
	}
	for i := range s.msgs {
		if o := &s.msgs[i]; o.a.id == kernel.Root && o.m.Role == kernel.RoleUser && !o.m.Marker {
			c.userText(s, i)
		}
	}
	if s.is(kernel.EvShutdown) {
		// A shutdown discards what waits for the next turn; a recovery
		// later ends the shutdown, and what is given after it counts again.
		for text, n := range c.next { // determinism: each key set on its own
			c.excused[text] += n
		}
		clear(c.next)
	}
	for _, cut := range s.cuts {
		if !c.kept(s, cut) {
			c.violate(UserTextOnce, cut.agent, "text %q streamed before %s was not kept as a partial message", textcut.Clip(cut.text, 60), cut.why)
		}
	}
}

// kept reports whether the step appended cut's text as a partial message of
// its agent.
func (c *userTextChecker) kept(s *stepObs, cut cutObs) bool {
	for i := range s.msgs {
		if o := &s.msgs[i]; o.a.id == cut.agent && o.m.Role == kernel.RoleAssistant && o.m.Partial && o.m.Content == cut.text {
			return true
		}
	}
	return false
}

// userText: each user text appears as often as it was given, an
// interjection right after the partial text it cut.
func (c *userTextChecker) userText(s *stepObs, i int) {
	o := &s.msgs[i]
	text := o.m.Content
	c.seen[text]++
	if c.next[text] > 0 && slices.Contains(s.started, o.a) {
		c.next[text]-- // a next turn started with it
	}
	if n, want := c.seen[text], c.given[text]; n > want {
		// Covers want 0: a text nobody typed.
		c.violate(UserTextOnce, kernel.Root, "user text %q appears %d times, given %d", text, n, want)
	}
	interjected := false
	defer func() {
		if o.m.Interjection != interjected {
			c.violate(UserTextOnce, kernel.Root, "user text %q is flagged interjection=%v, but it was %s", text, o.m.Interjection, map[bool]string{true: "interjected", false: "submitted"}[interjected])
		}
	}()
	for j := range c.interjs {
		ij := &c.interjs[j]
		if ij.seen || ij.text != text {
			continue
		}
		ij.seen, interjected = true, true
		if ij.partial != "" {
			h := c.m.c.View(kernel.Root).History
			if o.i == 0 || o.i > len(h) {
				break
			}
			if prev := h[o.i-1]; prev.Role != kernel.RoleAssistant || prev.Content != ij.partial || !prev.Partial {
				c.violate(UserTextOnce, kernel.Root, "interjection %q does not follow the partial text %q it cut", text, ij.partial)
			}
		}
		break
	}
}

func (c *userTextChecker) finish() {
	for _, text := range keys.Sorted(c.given) {
		if n, want := c.seen[text], c.given[text]; n < want-c.excused[text] {
			c.violate(UserTextOnce, kernel.Root, "user text %q appears %d times, given %d", text, n, want)
		}
	}
}
