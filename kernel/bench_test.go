package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/qmuntal/stateless"
)

// BenchmarkStep measures one event through a depth-1 agent. "delta" is the
// hot path (a streamed text chunk); "turn" averages over whole turns (submit,
// 8 chunks, end) so it includes real transitions. "stateless_fire" is a bare
// qmuntal/stateless Fire on a 5-state machine (external storage, immediate
// mode, a ring of Permit transitions), measured in the same run so the ratio
// is honest: the kernel's step stays within 3× of it (docs/performance.md).
func BenchmarkStep(b *testing.B) {
	b.Run("stateless_fire", func(b *testing.B) {
		type st uint8
		type tr uint8
		var s st
		sm := stateless.NewStateMachineWithExternalStorage(
			func(context.Context) (stateless.State, error) { return s, nil },
			func(_ context.Context, v stateless.State) error { s = v.(st); return nil },
			stateless.FiringImmediate)
		for i := st(0); i < 5; i++ {
			sm.Configure(i).Permit(tr(i), (i+1)%5)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := sm.Fire(tr(i % 5)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("delta", func(b *testing.B) {
		k := MustNew(Config{Limits: DefaultLimits()})
		out := k.Step(Submit(0, "go"))
		req := out[firstOf(out, EffStartLLM)].Op
		chunk := uint32(0)
		b.ReportAllocs()
		for b.Loop() {
			chunk++
			k.Step(TextDelta(0, req, chunk, "tok "))
		}
	})
	b.Run("turn", func(b *testing.B) {
		// A fresh kernel every 512 turns (its construction is timed too), so
		// the benchmark measures turns, not a history growing without end.
		var k *Kernel
		events := 0
		b.ReportAllocs()
		for b.Loop() {
			if events%(512*10) == 0 {
				k = MustNew(Config{Limits: DefaultLimits()})
			}
			out := k.Step(Submit(0, "go"))
			req := out[firstOf(out, EffStartLLM)].Op
			for c := uint32(1); c <= 8; c++ {
				k.Step(TextDelta(0, req, c, "tok "))
			}
			k.Step(LLMEnd(0, req))
			events += 10
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
	})
}

func firstOf(effs []Effect, kind EffectKind) int {
	for i, e := range effs {
		if e.Kind == kind {
			return i
		}
	}
	panic(fmt.Sprintf("no %s effect", kind))
}

func reqOf(effs []Effect, agent AgentID) OpID {
	for _, e := range effs {
		if e.Kind == EffStartLLM && e.Agent == agent {
			return e.Op
		}
	}
	panic("no request")
}

// buildChain returns a kernel with a chain main → c1 → … → cN whose leaf's
// request is live, and that leaf's request op.
func buildChain(n int) (*Kernel, OpID) {
	// A small lifecycle ring: its lazy growth to a large capacity is a
	// one-time cost that would land inside the timed section at one N and
	// not another, hiding the per-agent cost being measured.
	cfg := Config{Limits: DefaultLimits(), LogCapacity: 256}
	cfg.MaxDepth, cfg.MaxAgents = n, n+1
	k := MustNew(cfg)
	out := k.Step(Submit(0, "go"))
	req := reqOf(out, Root)
	agent := Root
	args, _ := json.Marshal(delegateArgs{Task: "deeper", Name: "c"})
	for d := 0; d < n; d++ {
		k.Step(CallFragment(0, req, 1, CallDelta{Index: 0, ID: "call", Name: "delegate", Args: string(args)}))
		out = k.Step(LLMEnd(0, req))
		agent = AgentID(k.NumAgents() - 1)
		req = reqOf(out, agent)
	}
	return k, req
}

// BenchmarkCancelChain: cancel at the root of a chain of depth N, then the
// leaf acknowledges; until quiescent. Cost must grow linearly in N (see the
// ns/agent metric, and TestEffectsLinear for the deterministic count).
func BenchmarkCancelChain(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run("N="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				k, leaf := buildChain(n)
				runtime.GC() // the setup's garbage is not the cancel's cost
				b.StartTimer()
				k.Step(Cancel(0, Root))
				k.Step(LLMError(0, leaf, FailureCancelled, ""))
				if !k.Quiescent() {
					b.Fatal("not quiescent")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/agent")
		})
	}
}

// buildFanout streams a message delegating to n children, up to (not
// including) its end.
func buildFanout(n int) (*Kernel, OpID) {
	cfg := Config{Limits: DefaultLimits(), LogCapacity: 256} // see buildChain
	cfg.MaxChildren, cfg.MaxAgents, cfg.MaxParallelRequests = n, n+1, n+1
	cfg.MaxCalls = n
	k := MustNew(cfg)
	out := k.Step(Submit(0, "go"))
	req := reqOf(out, Root)
	for i := 0; i < n; i++ {
		args := `{"task":"part ` + strconv.Itoa(i) + `","name":"w"}`
		k.Step(CallFragment(0, req, uint32(i+1), CallDelta{Index: i, ID: "call_" + strconv.Itoa(i), Name: "delegate", Args: args}))
	}
	return k, req
}

// BenchmarkFanout: N children delegated in parallel (one message), then the
// root is cancelled and every child acknowledges; until quiescent.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run("N="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			reqs := make([]OpID, 0, n)
			for b.Loop() {
				b.StopTimer()
				k, req := buildFanout(n)
				runtime.GC() // the setup's garbage is not the fan-out's cost
				b.StartTimer()
				out := k.Step(LLMEnd(0, req))
				reqs = reqs[:0]
				for _, e := range out {
					if e.Kind == EffStartLLM {
						reqs = append(reqs, e.Op)
					}
				}
				k.Step(Cancel(0, Root))
				for _, r := range reqs {
					k.Step(LLMError(0, r, FailureCancelled, ""))
				}
				if !k.Quiescent() || len(reqs) != n {
					b.Fatal("not quiescent")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/agent")
		})
	}
}

// TestEffectsLinear: the effects a cancel chain and a fan-out emit grow
// linearly in N (effects per agent is the same at N=100 and N=2000): no
// repeated cancels, timers or lifecycle records per level. It counts
// effects, not time — whether the time is linear is the benchmarks' job
// (ns/agent), since timed tests are noise on shared machines.
func TestEffectsLinear(t *testing.T) {
	perAgent := func(n int, chain bool) float64 {
		var effects int
		if chain {
			k, leaf := buildChain(n)
			effects += len(k.Step(Cancel(0, Root)))
			effects += len(k.Step(LLMError(0, leaf, FailureCancelled, "")))
		} else {
			k, req := buildFanout(n)
			out := k.Step(LLMEnd(0, req))
			effects += len(out)
			var reqs []OpID
			for _, e := range out {
				if e.Kind == EffStartLLM {
					reqs = append(reqs, e.Op)
				}
			}
			effects += len(k.Step(Cancel(0, Root)))
			for _, r := range reqs {
				effects += len(k.Step(LLMError(0, r, FailureCancelled, "")))
			}
		}
		return float64(effects) / float64(n)
	}
	for _, chain := range []bool{true, false} {
		small, large := perAgent(100, chain), perAgent(2000, chain)
		if large > small*1.05 || large < small*0.95 {
			t.Errorf("chain=%v: %.2f effects/agent at N=100 but %.2f at N=2000: not linear", chain, small, large)
		}
	}
}
