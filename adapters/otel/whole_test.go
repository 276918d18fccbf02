package otel_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/otel"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/otlptest"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
)

// exportWhole feeds the steps to a derivation of the host's own (spans.New,
// named by Model)
// and hands every span it ends to ExportWhole as the Temporal workflow
// does: through JSON (an activity's input), without the derivation's
// bookkeeping, with the request's answer read where the kernel is (Answer),
// kernel time 0 at origin.
func exportWhole(t *testing.T, e *otel.Exporter, cfg kernel.Config, evs []kernel.Event, origin time.Time) {
	t.Helper()
	d := spans.New(spans.Config{RootName: cfg.RootName, DelegateTool: cfg.DelegateTool, Model: e.Model()})
	replay(t, cfg, evs, func(_ int, s ports.Step) {
		for _, c := range d.Step(s.Event, s.Effects) {
			if c.Kind != spans.Ended {
				continue
			}
			b, err := json.Marshal(c.Span)
			if err != nil {
				t.Fatal(err)
			}
			var sp spans.Span
			if err := json.Unmarshal(b, &sp); err != nil {
				t.Fatalf("a span does not travel as JSON: %v\n%s", err, b)
			}
			var answer *kernel.Message
			if e.Content() && sp.Kind == spans.KindChat {
				answer = otel.Answer(s.Kernel, c.Span)
			}
			e.ExportWhole("conv-test", &sp, answer, origin)
		}
	})
	if open := d.Open(); len(open) > 0 {
		t.Fatalf("%d span(s) left open", len(open))
	}
}

// fingerprint is everything a received span says, in one comparable
// string: ids, parent, name, kind, times, status, attributes, events.
func fingerprint(sp otlptest.Span) string {
	var attrs []string
	for _, kv := range sp.GetAttributes() {
		attrs = append(attrs, kv.GetKey()+"="+kv.GetValue().String())
	}
	slices.Sort(attrs)
	var evs []string
	for _, ev := range sp.GetEvents() {
		var ea []string
		for _, kv := range ev.GetAttributes() {
			ea = append(ea, kv.GetKey()+"="+kv.GetValue().String())
		}
		slices.Sort(ea)
		evs = append(evs, fmt.Sprintf("%s@%d%v", ev.GetName(), ev.GetTimeUnixNano(), ea))
	}
	return fmt.Sprintf("%s/%s<-%s %q kind=%v [%d,%d] status=%v attrs=%v events=%v", sp.TraceID(), sp.ID(), sp.ParentID(), sp.GetName(), sp.GetKind(),
		sp.GetStartTimeUnixNano(), sp.GetEndTimeUnixNano(), sp.GetStatus(), attrs, evs)
}

func fingerprints(rec received) []string {
	var out []string
	for _, sp := range rec.all {
		out = append(out, fingerprint(sp))
	}
	slices.Sort(out)
	return out
}

// TestExportWholeSendsWhatObserveSends: spans a host derives itself and
// hands over as they end, through JSON (the Temporal workflow's way),
// reach the receiver
// exactly as the live exporter sends the same steps: the same ids,
// parents, names, times, attributes, events and statuses — with and
// without the content opt-in.
func TestExportWholeSendsWhatObserveSends(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, content := range []bool{false, true} {
		t.Run(fmt.Sprintf("content=%v", content), func(t *testing.T) {
			cfg, evs := run(t, embedded(t, "cancel-reaches-descendants"), sim.Options{})
			settings := otel.Settings{Protocol: otel.ProtocolHTTP, Content: content}
			live := receiver(t, otel.ProtocolHTTP)
			e := exporter(t, otel.Config{Settings: settings, RootName: cfg.RootName, Model: "gpt-test", BaseURL: "http://llm.example:8080/v1", Now: func() time.Time { return t0 }})
			replay(t, cfg, evs, func(_ int, s ports.Step) { e.Observe(s) })
			shutdown(t, e)

			whole := receiver(t, otel.ProtocolHTTP)
			w := exporter(t, otel.Config{Settings: settings, RootName: cfg.RootName, Model: "gpt-test", BaseURL: "http://llm.example:8080/v1"})
			exportWhole(t, w, cfg, evs, t0)
			shutdown(t, w)

			want, got := fingerprints(index(t, live)), fingerprints(index(t, whole))
			if len(want) == 0 || len(want) != len(derived(t, cfg, evs)) {
				t.Fatalf("the live export sent %d spans", len(want))
			}
			if !slices.Equal(got, want) {
				t.Errorf("sent whole:\n  %s\nlive:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			index(t, whole).complete(t)
		})
	}
}

// TestExportWholeKeepsTracesWhole: under a parent-based ratio sampler,
// each root turn's trace is sent whole or not at all, though its spans
// reach the exporter one by one, children first: a child's parent carries
// the sampler's decision on its trace.
func TestExportWholeKeepsTracesWhole(t *testing.T) {
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")
	// Sixteen root turns, each a trace of four spans: the turn, a
	// request, a tool call, a request.
	var script, inputs strings.Builder
	for i := range 16 {
		script.WriteString("    - calls: [{tool: quick, args: {n: 1}}]\n    - {text: done}\n")
		fmt.Fprintf(&inputs, "  - {at: %ds, submit: \"turn %d\"}\n", 10*i, i)
	}
	s, err := scenario.Load("turns.yaml", []byte("name: turns\nagents:\n  main:\n"+script.String()+
		"tools:\n  quick: {duration: 100ms, result: ok}\ninputs:\n"+inputs.String()))
	if err != nil {
		t.Fatal(err)
	}
	cfg, all := run(t, s, sim.Options{})
	const perTrace = 4
	if n := len(derived(t, cfg, all)); n != 16*perTrace {
		t.Fatalf("the turns derive %d spans, want %d", n, 16*perTrace)
	}
	r := receiver(t, otel.ProtocolHTTP)
	w := exporter(t, otel.Config{Settings: otel.Settings{Protocol: otel.ProtocolHTTP}, RootName: cfg.RootName})
	exportWhole(t, w, cfg, all, time.Now())
	shutdown(t, w)
	rec := index(t, r)
	traces := map[string]int{}
	for _, sp := range rec.all {
		traces[sp.TraceID()]++
	}
	if len(traces) == 0 || len(traces) == 16 {
		t.Fatalf("%d of 16 traces kept: the sampler did not decide", len(traces))
	}
	for id, n := range traces {
		if n != perTrace {
			t.Errorf("trace %s: %d spans sent, want all %d or none", id, n, perTrace)
		}
	}
	rec.complete(t)
}
