package kernel

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The commands that move the world around the kernel: its configuration,
// the user's cancels, the model's streams, the tools' results and the clock.

// configure sets the kernel's configuration; only before the first event.
func (d *transcriptDriver) configure(dir directive) ([]string, error) {
	if d.k != nil {
		return nil, fmt.Errorf("config must come before the first event")
	}
	if err := dir.want(0, 0, configKeys()...); err != nil {
		return nil, err
	}
	for _, key := range dir.keys {
		if err := d.set(key, dir.kv[key]); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", key, dir.kv[key], err)
		}
	}
	return nil, d.cfg.Validate()
}

func configKeys() []string {
	keys := []string{"system", "child_system", "log_capacity", "idempotent", "ask", "profiles", "root_profile"}
	for _, s := range LimitTable() {
		keys = append(keys, s.Name)
	}
	return keys
}

// set applies one config key.
func (d *transcriptDriver) set(key, val string) error {
	var err error
	switch key {
	case "system":
		d.cfg.System = val
	case "child_system":
		d.cfg.ChildSystem = val
	case "idempotent":
		d.cfg.Idempotent = strings.Split(val, ",")
	case "ask":
		d.cfg.Ask = strings.Split(val, ",")
	case "log_capacity":
		d.cfg.LogCapacity, err = strconv.Atoi(val)
	case "profiles":
		err = json.Unmarshal([]byte(val), &d.cfg.Profiles)
	case "root_profile":
		d.cfg.RootProfile = val
	default:
		err = setLimit(&d.cfg.Limits, key, val)
	}
	return err
}

// setLimit sets the limit the scenario format names key.
func setLimit(l *Limits, key, val string) error {
	for _, s := range LimitTable() {
		if s.Name != key {
			continue
		}
		if s.Unit == UnitDuration {
			v, err := time.ParseDuration(val)
			s.Set(l, int64(v))
			return err
		}
		v, err := strconv.ParseInt(val, 10, 64)
		s.Set(l, v)
		return err
	}
	return fmt.Errorf("no limit %s", key)
}

func (d *transcriptDriver) cancel(dir directive) ([]string, error) {
	if err := dir.want(1, 1, "turn"); err != nil {
		return nil, err
	}
	id, err := d.agent(dir.arg(0))
	if err != nil {
		return nil, err
	}
	ev := Cancel(0, id)
	if s, ok := dir.kv["turn"]; ok {
		if ev.Turn, err = strconv.ParseUint(s, 10, 64); err != nil {
			return nil, fmt.Errorf("turn=%s: %w", s, err)
		}
	}
	return d.step(ev, "")
}

// The stream commands answer an agent's last request (or op=N): a text
// chunk, a call fragment, the stream's end, its failure, a retry.

func (d *transcriptDriver) chunk(dir directive) ([]string, error) {
	if err := dir.want(2, 2, "chunk", "op"); err != nil {
		return nil, err
	}
	op, n, err := d.nextChunk(dir)
	if err != nil {
		return nil, err
	}
	return d.step(TextDelta(0, op, n, dir.arg(1)), "")
}

func (d *transcriptDriver) callFragment(dir directive) ([]string, error) {
	if err := dir.want(2, 2, "id", "name", "args", "chunk", "op"); err != nil {
		return nil, err
	}
	index, err := strconv.Atoi(dir.arg(1))
	if err != nil {
		return nil, fmt.Errorf("call index %q: %w", dir.arg(1), err)
	}
	op, n, err := d.nextChunk(dir)
	if err != nil {
		return nil, err
	}
	return d.step(CallFragment(0, op, n, CallDelta{Index: index, ID: dir.kv["id"], Name: dir.kv["name"], Args: dir.kv["args"]}), "")
}

func (d *transcriptDriver) end(dir directive) ([]string, error) {
	if err := dir.want(1, 1, "op", "usage", "reasoning", "field", "details"); err != nil {
		return nil, err
	}
	op, err := d.request(dir)
	if err != nil {
		return nil, err
	}
	ev := LLMEnd(0, op)
	if s, ok := dir.kv["usage"]; ok {
		if ev.Usage, err = parseUsage(s); err != nil {
			return nil, fmt.Errorf("usage=%s: %w", s, err)
		}
	}
	if text, details := dir.kv["reasoning"], dir.kv["details"]; text != "" || details != "" {
		ev.Reasoning = &Reasoning{Text: text, Field: dir.kv["field"], Details: details}
	}
	return d.step(ev, "")
}

// parseUsage reads usage=PROMPT/COMPLETION[/CACHED[/REASONING]].
func parseUsage(s string) (*Usage, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 4 {
		return nil, fmt.Errorf("want PROMPT/COMPLETION[/CACHED[/REASONING]]")
	}
	var n [4]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		n[i] = v
	}
	return &Usage{PromptTokens: n[0], CompletionTokens: n[1], CachedTokens: n[2], ReasoningTokens: n[3]}, nil
}

// compact is the user asking for the root's history to be compacted.
func (d *transcriptDriver) compact(dir directive) ([]string, error) {
	if err := dir.want(0, 1); err != nil {
		return nil, err
	}
	return d.step(Compact(0, dir.arg(0)), "")
}

func (d *transcriptDriver) fail(dir directive) ([]string, error) {
	if err := dir.want(2, 3, "op"); err != nil {
		return nil, err
	}
	var f Failure
	if err := f.UnmarshalText([]byte(dir.arg(1))); err != nil {
		return nil, err
	}
	op, err := d.request(dir)
	if err != nil {
		return nil, err
	}
	return d.step(LLMError(0, op, f, dir.arg(2)), "")
}

func (d *transcriptDriver) retry(dir directive) ([]string, error) {
	if err := dir.want(1, 2, "attempt", "after", "op"); err != nil {
		return nil, err
	}
	attempt, err := strconv.Atoi(dir.kv["attempt"])
	if err != nil {
		return nil, fmt.Errorf("attempt=: %w", err)
	}
	after, err := time.ParseDuration(dir.kv["after"])
	if err != nil {
		return nil, fmt.Errorf("after=: %w", err)
	}
	op, err := d.request(dir)
	if err != nil {
		return nil, err
	}
	return d.step(LLMRetry(0, op, attempt, after, dir.arg(1)), "")
}

// nextChunk is the request a chunk or fragment belongs to and its number:
// the next of that request, or chunk=N (to send a duplicate).
func (d *transcriptDriver) nextChunk(dir directive) (OpID, uint32, error) {
	op, err := d.request(dir)
	if err != nil {
		return 0, 0, err
	}
	n := d.chunks[op] + 1
	if s, ok := dir.kv["chunk"]; ok {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return 0, 0, fmt.Errorf("chunk=%s: %w", s, err)
		}
		n = uint32(v)
	}
	d.chunks[op] = max(d.chunks[op], n)
	return op, n, nil
}

// request is the op a stream command answers: op= when given (an older
// request, to show what happens to its late events), else the agent's last.
func (d *transcriptDriver) request(dir directive) (OpID, error) {
	id, err := d.agent(dir.arg(0))
	if err != nil {
		return 0, err
	}
	if s, ok := dir.kv["op"]; ok {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("op=%s: %w", s, err)
		}
		return OpID(n), nil
	}
	op, ok := d.reqs[id]
	if !ok {
		return 0, fmt.Errorf("%s has sent no request", dir.arg(0))
	}
	return op, nil
}

func (d *transcriptDriver) result(dir directive) ([]string, error) {
	if err := dir.want(2, 3); err != nil {
		return nil, err
	}
	op, ok := d.calls[dir.arg(0)]
	if !ok {
		return nil, fmt.Errorf("no tool was started for call %s", dir.arg(0))
	}
	var s ToolStatus
	if err := s.UnmarshalText([]byte(dir.arg(1))); err != nil {
		return nil, err
	}
	return d.step(ToolResult(0, op, s, dir.arg(2)), "")
}

func (d *transcriptDriver) timer(dir directive) ([]string, error) {
	if err := dir.want(1, 1); err != nil {
		return nil, err
	}
	n, err := strconv.ParseUint(dir.arg(0), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("timer op %q: %w", dir.arg(0), err)
	}
	delete(d.timers, OpID(n))
	return d.step(TimerFired(0, OpID(n)), "")
}

// advance moves the clock, firing every timer due on the way in (deadline,
// op id) order, the simulator's rule; a timer the kernel arms while firing
// another fires too when it comes due within the window.
func (d *transcriptDriver) advance(dir directive) ([]string, error) {
	if err := dir.want(1, 1); err != nil {
		return nil, err
	}
	by, err := time.ParseDuration(dir.arg(0))
	if err != nil || by < 0 {
		return nil, fmt.Errorf("advance takes a duration ≥ 0, got %q", dir.arg(0))
	}
	target := d.now + by
	var out []string
	for {
		due, ok := d.nextDue(target)
		if !ok {
			break
		}
		delete(d.timers, due.Op)
		d.now = max(d.now, due.At)
		lines, err := d.step(TimerFired(0, due.Op), " ("+due.Timer.String()+")")
		if err != nil {
			return nil, err
		}
		out = append(out, lines...)
	}
	d.now = target
	if len(out) == 0 {
		out = append(out, fmt.Sprintf("@%v: no timer due", d.now))
	}
	return out, nil
}

// nextDue is the live timer due first by target, if any.
func (d *transcriptDriver) nextDue(target time.Duration) (Effect, bool) {
	var best Effect
	for _, e := range d.timers { // determinism: the minimum by (At, Op), whatever the order
		if e.At <= target && (best.Op == 0 || e.At < best.At || (e.At == best.At && e.Op < best.Op)) {
			best = e
		}
	}
	return best, best.Op != 0
}

// recover crashes the host: every op it ran is gone, and a fresh kernel
// rebuilt from the events it had fed (docs/durable.md) steps Recover. The
// rebuilt kernel must answer every replayed event as the first one did.
func (d *transcriptDriver) recover(dir directive) ([]string, error) {
	if err := dir.want(0, 0); err != nil {
		return nil, err
	}
	fresh := MustNew(d.cfg)
	for i, s := range d.run.steps {
		got := fresh.Step(s.ev)
		if a, b := describeAll(got), describeAll(s.effs); !slices.Equal(a, b) {
			return nil, fmt.Errorf("replaying event %d (%s) gave\n%s\nwhere the crashed kernel gave\n%s", i, s.ev.Describe(), strings.Join(a, "\n"), strings.Join(b, "\n"))
		}
	}
	d.k = fresh
	clear(d.timers)
	return d.step(Recover(0), "")
}
