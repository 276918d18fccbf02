package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// compactionLoops are the broken loops of I32–I36 (docs/semantics.md,
// "Compaction"): each changes one step of a compaction the way a real loop
// gets it wrong. TestOracleCatchesCompactionLoops holds the oracle to
// catching each in its scenario (named first), TestOracleTeethRapid (in
// package sim_test, through CompactionLoops) in random worlds, shrunk.
func compactionLoops() []BrokenLoop {
	return []BrokenLoop{
		{"compaction-before-request", "I32: the replacement loses the summary: the history becomes the system prompt and the kept tail", oracle.CompactionAtomic,
			hiding(func(m kernel.Message) bool { return m.Summary })},
		{"compaction-before-request", "I33: the history is cut by a plain message count, one message further than the cut point the tail's size allows", oracle.NoSplitPair,
			cuttingOneFurther()},
		{"compaction-cannot-fit", "I34: the loop never looks at context_window: it neither compacts nor refuses a request past the window", oracle.WindowHeld,
			ignoring(func(l *kernel.Limits) { l.ContextWindow = 0 })},
		{"compaction-before-request", "I35: the loop forgets a compaction preceded the request and compacts again before sending it", oracle.OneCompaction,
			compactingTwice()},
		{"compaction-cancelled", "I36: a cancelled compaction keeps what its summary had streamed as partial text", oracle.AbortedCompactionHarmless,
			keepingAbortedSummary()},
	}
}

// cuttingOneFurther is a loop whose compactions summarise one message more
// than their cut point allows: the compacted record counts it, and the
// history after the summary lacks it.
func cuttingOneFurther() CoreFactory {
	return broken(func(b *brokenCore) {
		short := map[kernel.AgentID]bool{}
		b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
			out := b.inner(ev)
			for i := range out {
				l := &out[i].Life
				if out[i].Kind != kernel.EffEmit || l.Kind != kernel.LifeCompacted {
					continue
				}
				h := b.Core.View(l.Agent).History
				if k := summaryAt(h); k >= 0 && k+1 < len(h) && !short[l.Agent] {
					short[l.Agent] = true
					l.N++
				}
			}
			return out
		}
		b.viewID = func(_ *brokenCore, id kernel.AgentID, v oracle.View) oracle.View {
			if k := summaryAt(v.History); short[id] && k >= 0 && k+1 < len(v.History) {
				v.History = slices.Delete(slices.Clone(v.History), k+1, k+2)
			}
			return v
		}
	})
}

// summaryAt is the index of a history's summary (-1: none).
func summaryAt(h []kernel.Message) int {
	return slices.IndexFunc(h, func(m kernel.Message) bool { return m.Summary })
}

// compactingTwice is a loop that, once a compaction completed, compacts
// again instead of sending the request it compacted for.
func compactingTwice() CoreFactory {
	return broken(func(b *brokenCore) {
		b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
			out := b.inner(ev)
			compacted := kernel.NoAgent
			for i := range out {
				e := &out[i]
				switch {
				case e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeCompacted:
					compacted = e.Agent
				case e.Kind == kernel.EffStartLLM && !e.Compact && e.Agent == compacted:
					e.Compact = true
					e.Messages = []kernel.Message{{Role: kernel.RoleUser, Content: "Summarise the conversation again."}}
				}
			}
			return out
		}
	})
}

// keepingAbortedSummary is a loop that, when a compaction is aborted,
// keeps what the summary had streamed as a partial assistant message where
// the compaction began.
func keepingAbortedSummary() CoreFactory {
	return broken(func(b *brokenCore) {
		type compacting struct {
			op   kernel.OpID
			at   int
			text string
		}
		running := map[kernel.AgentID]*compacting{}
		kept := map[kernel.AgentID]*compacting{}
		b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
			for _, c := range running { // determinism: at most one matches
				if ev.Kind == kernel.EvLLMDelta && ev.Op == c.op {
					c.text += ev.Text
				}
			}
			out := b.inner(ev)
			for i := range out {
				e := &out[i]
				switch {
				case e.Kind == kernel.EffStartLLM && e.Compact:
					running[e.Agent] = &compacting{op: e.Op, at: len(b.Core.View(e.Agent).History)}
				case e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeCompacted:
					delete(running, e.Agent)
				case e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeInterrupted:
					if c := running[e.Agent]; c != nil && c.text != "" {
						kept[e.Agent] = c
					}
					delete(running, e.Agent)
				}
			}
			return out
		}
		b.viewID = func(_ *brokenCore, id kernel.AgentID, v oracle.View) oracle.View {
			if c := kept[id]; c != nil && c.at <= len(v.History) {
				v.History = slices.Insert(slices.Clone(v.History), c.at, kernel.Message{Role: kernel.RoleAssistant, Content: c.text, Partial: true})
			}
			return v
		}
	})
}

// TestOracleCatchesCompactionLoops: each compaction scenario passes with
// the kernel and fails — the right invariant named first — with its broken
// loop.
func TestOracleCatchesCompactionLoops(t *testing.T) {
	for _, bl := range compactionLoops() {
		t.Run(string(bl.Invariant)+"/"+bl.Scenario, func(t *testing.T) {
			assertCaught(t, bl.Scenario, bl.Core, bl.Invariant, bl.Failure)
		})
	}
}

// CompactionLoops returns the broken loops of compaction's invariants
// and of the usage clause of I20 (TestOracleTeethRapid runs them in random
// worlds).
func CompactionLoops() []BrokenLoop { return append(compactionLoops(), clauseLoops()...) }

// crashMidCompaction is a world a crash catches a compaction in: the
// server refuses the second question as too long, and the crash comes
// while the summary streams, slowly, word by word.
const crashMidCompaction = "name: crash-mid-compaction\nagents:\n  main:\n    - {text: first answer}\n    - {text: refused}\n    - {text: answered after the summary}\n" +
	"summaries:\n  main:\n    - {text: the summary streams slowly word by word, rate: 5}\n" +
	"faults:\n  - {at: 1s, agent: main, fault: context_length}\ninputs:\n  - {at: 0s, submit: one}\n  - {at: 1s, submit: two}\n"

// compactionCrashLoop is the broken recovery of I36: it keeps what the
// lost summary had streamed as partial text, as a recovery that restarts a
// compaction like a request does (keeping a request's partial text).
func compactionCrashLoop() CrashLoop {
	return CrashLoop{crashMidCompaction, 1700 * time.Millisecond, nil, "keeps a lost compaction's streamed summary as partial text when the recovery asks the compaction again", oracle.AbortedCompactionHarmless,
		func(*scenario.Scenario) CoreFactory { return broken(keepingLostSummaries) }}
}

// keepingLostSummaries: on a recovery, an agent whose compaction was
// streaming shows what its summary had sent as a partial assistant message
// at the end of the history the compaction started from.
func keepingLostSummaries(b *brokenCore) {
	type compacting struct {
		op   kernel.OpID
		at   int
		text string
	}
	running := map[kernel.AgentID]*compacting{}
	kept := map[kernel.AgentID]*compacting{}
	b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		for _, c := range running { // determinism: at most one matches
			if ev.Kind == kernel.EvLLMDelta && ev.Op == c.op {
				c.text += ev.Text
			}
		}
		if ev.Kind == kernel.EvRecover {
			for id, c := range running { // determinism: each entry on its own
				if c.text != "" {
					kept[id] = c
				}
			}
		}
		out := b.inner(ev)
		for i := range out {
			e := &out[i]
			switch {
			case e.Kind == kernel.EffStartLLM && e.Compact && ev.Kind != kernel.EvRecover:
				running[e.Agent] = &compacting{op: e.Op, at: len(b.Core.View(e.Agent).History)}
			case e.Kind == kernel.EffStartLLM && e.Compact:
				running[e.Agent].op = e.Op
			case e.Kind == kernel.EffEmit && (e.Life.Kind == kernel.LifeCompacted || e.Life.Kind == kernel.LifeTurnEnded):
				delete(running, e.Agent)
			}
		}
		return out
	}
	b.viewID = func(_ *brokenCore, id kernel.AgentID, v oracle.View) oracle.View {
		if c := kept[id]; c != nil && c.at <= len(v.History) {
			v.History = slices.Insert(slices.Clone(v.History), c.at, kernel.Message{Role: kernel.RoleAssistant, Content: c.text, Partial: true})
		}
		return v
	}
}

// clauseLoops are the broken loops of what compaction and usage add to
// I20 (a turn's total counts what was reported, and nothing reported as
// zero), I22 (a completed compaction sends its request) and I23 (the
// views of usage and compaction).
func clauseLoops() []BrokenLoop {
	return []BrokenLoop{
		forgettingTheRequest(),
		{"compaction-cancelled", "I23: the agent's view says it is not compacting while its compaction streams", oracle.ViewsTellTruth,
			broken(func(b *brokenCore) {
				b.view = func(v oracle.View) oracle.View { v.Compacting = false; return v }
			})},
		{"compaction-before-request", "I23: the agent's view reports the usage of its turn's last request, not the turn's total", oracle.ViewsTellTruth,
			broken(func(b *brokenCore) {
				b.view = func(v oracle.View) oracle.View {
					if v.Usage != nil && v.Usage.Requests > 1 {
						u := *v.Usage
						u.Requests = 1
						v.Usage = &u
					}
					return v
				}
			})},
		{"child-compacts-under-deadline", "I20: a turn's total takes a request that reported nothing for one that reported zero (unreported dropped)", oracle.ResultsCarryText,
			broken(func(b *brokenCore) {
				b.step = editingLife(func(l *kernel.Lifecycle) {
					if l.Kind == kernel.LifeTurnEnded && l.Usage != nil {
						l.Usage.Unreported = 0
					}
				})
			})},
		{"compaction-before-request", "I20: a turn's total forgets its compactions' requests", oracle.ResultsCarryText,
			broken(func(b *brokenCore) {
				compactions := map[kernel.AgentID]int{}
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					out := b.inner(ev)
					for i := range out {
						e := &out[i]
						switch {
						case e.Kind == kernel.EffStartLLM && e.Compact:
							compactions[e.Agent]++
						case e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnEnded && e.Life.Usage != nil:
							u := *e.Life.Usage
							u.Requests -= compactions[e.Agent]
							u.Unreported = max(u.Unreported-compactions[e.Agent], 0)
							e.Life.Usage = &u
							delete(compactions, e.Agent)
						}
					}
					return out
				}
			})},
	}
}

// TestOracleCatchesClauseLoops: I20 catches a turn total that miscounts,
// I22 a compaction that sends nothing after it.
func TestOracleCatchesClauseLoops(t *testing.T) {
	for _, bl := range clauseLoops() {
		t.Run(bl.Scenario, func(t *testing.T) {
			assertCaught(t, bl.Scenario, bl.Core, bl.Invariant, bl.Failure)
		})
	}
}

// forgettingTheRequest is I22's compaction loop: once the summary is in,
// the request the compaction preceded is never sent.
func forgettingTheRequest() BrokenLoop {
	return BrokenLoop{"compaction-before-request", "I22: once a compaction completes, the request it preceded is never sent", oracle.NoWaitingForNothing,
		broken(func(b *brokenCore) {
			b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
				out := b.inner(ev)
				compacted := kernel.NoAgent
				return slices.DeleteFunc(out, func(e kernel.Effect) bool {
					if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeCompacted {
						compacted = e.Agent
					}
					return e.Kind == kernel.EffStartLLM && !e.Compact && e.Agent == compacted
				})
			}
		})}
}
