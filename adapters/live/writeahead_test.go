package live

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// TestWriteAheadRunsBeforeEffects: the WriteAhead hook sees every step, in
// order, before the driver has executed any of its effects — no op the
// step starts has a context yet, no timer it sets is in the heap, no
// cancel it sends has been delivered — and the observer sees the step
// after.
func TestWriteAheadRunsBeforeEffects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &script{gap: 10 * time.Millisecond, answer: func(req ports.Request) []chunk {
			if last(req).Role == kernel.RoleTool {
				return []chunk{{text: "done"}}
			}
			return []chunk{{call: &kernel.CallDelta{Index: 0, ID: "c1", Name: "grep", Args: `{}`}}}
		}}
		tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
			time.Sleep(time.Second)
			return ports.ToolResult{Status: kernel.ToolOK, Content: "found"}
		})
		var d *Driver
		var problems []error
		var logged, observed []kernel.EventKind
		rec := newRecorder()
		cfg := Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: m, Tools: tools,
			WriteAhead: func(s ports.Step) error {
				logged = append(logged, s.Event.Kind)
				for _, e := range s.Effects {
					_, started := d.ops[e.Op]
					_, armed := d.timers.live[e.Op]
					switch {
					case (e.Kind == kernel.EffStartLLM || e.Kind == kernel.EffStartTool) && started:
						problems = append(problems, fmt.Errorf("%s: op %d started before it was logged", s.Event.Describe(), e.Op))
					case e.Kind == kernel.EffSetTimer && armed:
						problems = append(problems, fmt.Errorf("%s: timer %d armed before it was logged", s.Event.Describe(), e.Op))
					}
				}
				return nil
			},
			Observer: func(s ports.Step) {
				observed = append(observed, s.Event.Kind)
				rec.observe(s)
			},
		}
		var err error
		if d, err = New(cfg); err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		if err := d.Submit(t.Context(), "find"); err != nil {
			t.Fatal(err)
		}
		<-rec.ended
		stop()
		if err := errors.Join(problems...); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(logged) != fmt.Sprint(observed) || len(logged) < 6 {
			t.Fatalf("logged %v, observed %v", logged, observed)
		}
	})
}

// TestWriteAheadFailureAbandonsStubbornOps: when the hook fails, Run
// cancels every op and returns the error after at most Grace, even though
// a tool ignores its context; that tool is listed by Abandoned until it
// returns, and nothing it sends reaches the kernel.
func TestWriteAheadFailureAbandonsStubbornOps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &script{gap: time.Millisecond, answer: func(req ports.Request) []chunk {
			return []chunk{{call: &kernel.CallDelta{Index: 0, ID: "c1", Name: "slow", Args: `{}`}}}
		}}
		started := make(chan time.Time, 1)
		tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
			started <- time.Now()
			time.Sleep(time.Minute) // ignores ctx
			return ports.ToolResult{Status: kernel.ToolOK, Content: "too late"}
		})
		disk := errors.New("no space left on device")
		steps := 0
		cfg := Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: m, Tools: tools,
			WriteAhead: func(s ports.Step) error {
				steps++
				if s.Event.Kind == kernel.EvTimer || steps > 10 {
					return disk
				}
				return nil
			}}
		cfg.Kernel.Grace = 2 * time.Second
		cfg.Kernel.ToolTimeout = 10 * time.Second
		d, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- d.Run(context.Background()) }()
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		t0 := <-started
		err = <-errc
		if !errors.Is(err, ErrWriteAhead) || !errors.Is(err, disk) {
			t.Fatalf("Run: %v", err)
		}
		if waited := time.Since(t0); waited != 10*time.Second+2*time.Second {
			t.Fatalf("Run returned %v after the tool started, want its deadline plus Grace", waited)
		}
		if a := d.Abandoned(); len(a) != 1 || a[0].Tool != "slow" {
			t.Fatalf("abandoned %+v", a)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if a := d.Abandoned(); len(a) != 0 {
			t.Fatalf("still listed after returning: %+v", a)
		}
	})
}

// TestResumeDeliversRecover: a driver resumed on a rebuilt kernel steps
// Recover first, at the kernel's last time, and its clock goes on from
// there.
func TestResumeDeliversRecover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits()})
		k.Step(kernel.Submit(5*time.Second, "hi")) // a request in flight, op 2 or so
		m := &script{gap: time.Millisecond, answer: func(ports.Request) []chunk { return []chunk{{text: "hello"}} }}
		rec := newRecorder()
		d, err := Resume(Config{Model: m, Tools: noTools, Observer: rec.observe}, k)
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		end := <-rec.ended
		stop()
		if rec.steps[0].Event.Kind != kernel.EvRecover || rec.steps[0].Event.At != 5*time.Second {
			t.Fatalf("first step %s", rec.steps[0].Event.Describe())
		}
		if end.Outcome != kernel.OutcomeCompleted || end.At != 5*time.Second+time.Millisecond {
			t.Fatalf("turn ended %s at %v", end.Outcome, end.At)
		}
	})
}
