package scenario

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"
	"unicode/utf16"
)

// loadErr loads src as bad.yaml and returns its *LoadError (failing the
// test when it loads or fails otherwise).
func loadErr(t *testing.T, src string) *LoadError {
	t.Helper()
	_, err := Load("bad.yaml", []byte(src))
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("want a *LoadError, got %v", err)
	}
	return le
}

// TestLoadRefusesNonUTF8AtItsLine: bytes that are not UTF-8, and characters
// YAML does not allow, are refused at their line and column (counted as
// yaml.v3 counts: characters, with \r\n, \r, NEL, LS and PS ending lines),
// where yaml.v3 alone says only "invalid leading UTF-8 octet".
func TestLoadRefusesNonUTF8AtItsLine(t *testing.T) {
	for _, c := range []struct {
		name, src, where, msg string
	}{
		{"Latin-1 byte", "name: t\nabout: caf\xe9 au lait\nagents: {main: []}\n", "bad.yaml:2:11:", "not UTF-8: byte 0xE9"},
		{"leading byte", "name: t\nagents: {main: []}\nabout: ok\n\xff\n", "bad.yaml:4:1:", "not UTF-8: byte 0xFF"},
		{"after wide characters", "name: t\nabout: \"é✓𝄞\xc3\"\nagents: {main: []}\n", "bad.yaml:2:12:", "not UTF-8: byte 0xC3"},
		{"cut at the end", "name: t\nagents: {main: []}\nabout: \xe2\x9c", "bad.yaml:3:8:", "not UTF-8"},
		{"surrogate", "name: t\nabout: \xed\xa0\x80\nagents: {main: []}\n", "bad.yaml:2:8:", "not UTF-8"},
		{"overlong", "name: t\nabout: \xc0\xae\nagents: {main: []}\n", "bad.yaml:2:8:", "not UTF-8"},
		{"CRLF lines", "name: t\r\nagents: {main: []}\r\nabout: \xff\r\n", "bad.yaml:3:8:", "not UTF-8"},
		{"CR, NEL, LS and PS end lines", "name: t\rabout: \"a\u0085b\u2028c\u2029d\"\n\xff", "bad.yaml:6:1:", "not UTF-8"},
		{"after a byte order mark", "\uFEFFname: \xff\n", "bad.yaml:1:7:", "not UTF-8"},
		{"NUL", "name: t\x00\nagents: {main: []}\n", "bad.yaml:1:8:", "U+0000 is not allowed"},
		{"control character in a quoted string", "name: t\nabout: \"a\x01b\"\nagents: {main: []}\n", "bad.yaml:2:10:", "U+0001 is not allowed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := loadErr(t, c.src); !strings.HasPrefix(err.Error(), c.where) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %q\nwant prefix %q containing %q", err, c.where, c.msg)
			}
		})
	}
	// What YAML allows loads: tabs, wide characters, a byte order mark,
	// CRLF lines; and UTF-16 after its byte order mark, either way round.
	good := "\uFEFFname: t\r\nabout: \"caf\u00e9\t\u2713 \U0001D11E \u00a0\ufeff\"\r\nagents: {main: []}\r\n"
	for _, src := range []string{good, utf16Text(good[3:], false), utf16Text(good[3:], true)} {
		s, err := Load("ok.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if s.About != "caf\u00e9\t\u2713 \U0001D11E \u00a0\ufeff" {
			t.Fatalf("about %q", s.About)
		}
	}
	// Broken UTF-16 is refused where it breaks.
	for _, c := range []struct{ src, want string }{
		{utf16Text("name: t\nabout: x", false) + "\x00", "bad.yaml:2:9: not UTF-16: an odd number of bytes"},
		{utf16Text("name: t\nab", true) + "\xdc\x00", "bad.yaml:2:3: not UTF-16: a surrogate without its pair"},
		{utf16Text("name: t\nab", false) + "\x00\xd8" + utf16Text("x", false)[2:], "bad.yaml:2:3: not UTF-16: a surrogate without its pair"},
		{utf16Text("name: t\x01", false), "bad.yaml:1:8: character U+0001 is not allowed"},
	} {
		if err := loadErr(t, c.src); !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %q, want %q", err, c.want)
		}
	}
}

// utf16Text is s in UTF-16 with its byte order mark.
func utf16Text(s string, bigEndian bool) string {
	order := binary.AppendByteOrder(binary.LittleEndian)
	b := []byte{0xFF, 0xFE}
	if bigEndian {
		order, b = binary.BigEndian, []byte{0xFE, 0xFF}
	}
	for _, u := range utf16.Encode([]rune(s)) {
		b = order.AppendUint16(b, u)
	}
	return string(b)
}

// bomb is a scenario whose aliases nest: a reply of n calls, a script of n
// such replies, and scripts many times that script — n*n*copies calls from
// a file of a few kilobytes.
func bomb(n, copies int) string {
	var b strings.Builder
	b.WriteString("name: bomb\ntools: {t: {duration: 1s}}\nagents:\n  r: [&r {calls: [")
	b.WriteString(strings.TrimSuffix(strings.Repeat("{tool: t},", n), ","))
	b.WriteString("]}]\n  s: &s [")
	b.WriteString(strings.TrimSuffix(strings.Repeat("*r,", n), ","))
	b.WriteString("]\n  main: *s\n")
	for i := range copies {
		b.WriteString("  c" + strings.Repeat("x", i) + ": *s\n")
	}
	return b.String()
}

// TestLoadRefusesAliasBombs: aliases may repeat a value, but not expand a
// small file into millions of values (a 13 KB file once loaded as four
// million calls, after eleven seconds); the error names the alias where
// the file outgrew itself.
func TestLoadRefusesAliasBombs(t *testing.T) {
	src := bomb(1000, 3)
	err := loadErr(t, src)
	// Script s already names a million calls: the budget runs out in it.
	if !strings.HasPrefix(err.Error(), "bad.yaml:5:") || !strings.Contains(err.Error(), "aliases repeat more values than the file holds") ||
		!strings.HasPrefix(err.Path, "agents.s[") {
		t.Fatalf("got %q", err)
	}
	// Reuse within reason loads: the same bomb's shape, small.
	s := mustLoad(t, bomb(20, 3))
	if n := len(s.Agents["cxx"]) * len(s.Agents["cxx"][0].Calls); n != 400 {
		t.Fatalf("an aliased script holds %d calls, want 400", n)
	}
}

// TestValidateNamesFieldPaths: Validate on a value (a generator's, with no
// file) names the field's path, and Load names the same path with the
// line and column where the file writes it.
func TestValidateNamesFieldPaths(t *testing.T) {
	base := func() *Scenario {
		return mustLoad(t, goodHead+"faults:\n  - {at: 0s, agent: child, fault: rate_limit}\ninputs:\n  - {at: 0s, submit: go}\n  - {at: 1s, cancel: child}\n"+
			"expect:\n  outcomes: {main: completed}\n  llm_requests: {main: 2}\n  history: {main: {marker: false}}\n")
	}
	for _, c := range []struct {
		name, path, msg string
		bad             func(s *Scenario)
	}{
		{"empty name", "name", "required", func(s *Scenario) { s.Name = "" }},
		{"name", "name", `"a b" must match`, func(s *Scenario) { s.Name = "a b" }},
		{"limit", "limits.grace", "must be positive, got 0s", func(s *Scenario) { s.Limits.Grace = 0 }},
		{"limit range", "limits.max_depth", "must be in 0..65536, got -1", func(s *Scenario) { s.Limits.MaxDepth = -1 }},
		{"rate", "agents.main[0].rate", "must be positive, got 0", func(s *Scenario) { s.Agents["main"][0].Rate = 0 }},
		{"first token", "agents.child[0].first_token", "negative duration -1s", func(s *Scenario) { s.Agents["child"][0].FirstToken = -time.Second }},
		{"script name", "agents.a b", `"a b" must match`, func(s *Scenario) { s.Agents["a b"] = nil }},
		{"tool name", "tools.delegate", `"delegate" is taken by delegations`, func(s *Scenario) { s.Tools["delegate"] = ToolSpec{} }},
		{"tool duration", "tools.grep.duration", "negative duration -1s", func(s *Scenario) { s.Tools["grep"] = ToolSpec{Duration: -time.Second} }},
		{"cancel delay", "tools.grep.on_cancel", "negative delay -1s", func(s *Scenario) {
			s.Tools["grep"] = ToolSpec{Duration: time.Second, OnCancel: CancelDelay, CancelDelay: -time.Second}
		}},
		{"call", "agents.main[0].calls[1]", `unknown tool "hammer"`, func(s *Scenario) { s.Agents["main"][0].Calls[1].Tool = "hammer" }},
		{"delegation to the root", "agents.main[0].calls[0]", "cannot delegate to the root", func(s *Scenario) { s.Agents["main"][0].Calls[0].Delegate = RootScript }},
		{"fault kind", "faults[0].fault", `unknown fault "meteor"`, func(s *Scenario) { s.Faults[0].Fault = "meteor" }},
		{"fault after", "faults[0].after", "must not be negative, got -2", func(s *Scenario) { s.Faults[0].After = -2 }},
		{"fault agent", "faults[0].agent", `no script named "ghost"`, func(s *Scenario) { s.Faults[0].Agent = "ghost" }},
		{"input order", "inputs[1].at", "before the previous input's", func(s *Scenario) { s.Inputs[0].At = 2 * time.Second }},
		{"input turn", "inputs[0].turn", "only a cancel is bound to a turn", func(s *Scenario) { s.Inputs[0].Turn = 1 }},
		{"input action", "inputs[1]", "exactly one of", func(s *Scenario) { s.Inputs[1].Submit = "also" }},
		{"outcome", "expect.outcomes.main", `unknown outcome "exploded"`, func(s *Scenario) { s.Expect.Outcomes["main"] = "exploded" }},
		{"requests", "expect.llm_requests.main", "must not be negative, got -1", func(s *Scenario) { s.Expect.LLMRequests["main"] = -1 }},
		{"history ref", "expect.history.ghost", `no script named "ghost"`, func(s *Scenario) { s.Expect.History["ghost"] = HistoryExpect{} }},
		{"quiescent", "expect.quiescent_by", "negative duration -1s", func(s *Scenario) { s.Expect.QuiescentBy = -time.Second }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := base().Clone()
			s.File = ""
			c.bad(s)
			err := s.Validate()
			var le *LoadError
			if !errors.As(err, &le) || le.Path != c.path || !strings.Contains(le.Msg, c.msg) || le.File != "" || le.Line != 0 {
				t.Fatalf("Validate: %#v\nwant path %q, a message containing %q, no file or line", err, c.path, c.msg)
			}
			// The canonical form of the bad value, loaded: the same path and
			// message, now at a line.
			lerr := loadErr(t, string(s.YAML()))
			if lerr.Path != le.Path || lerr.Msg != le.Msg || lerr.Line == 0 {
				t.Fatalf("Load says %q, Validate %q", lerr, err)
			}
		})
	}
}

// TestLoadNamesWhereAFieldIs: a field's error points at the field itself:
// the value written, or the key for a name.
func TestLoadNamesWhereAFieldIs(t *testing.T) {
	src := "name: t\nagents:\n  main:\n    - text: hi\n      rate: -3\n"
	if err := loadErr(t, src); err.Line != 5 || err.Col != 13 || err.Path != "agents.main[0].rate" {
		t.Fatalf("rate: %q at %d:%d path %q", err, err.Line, err.Col, err.Path)
	}
	src = "name: t\nagents:\n  main: []\n  bad name:\n    - text: x\n"
	if err := loadErr(t, src); err.Line != 4 || err.Col != 3 {
		t.Fatalf("script name: %q, want the key at 4:3", err)
	}
	// A reference Validate finds: at the value that names it.
	src = "name: t\nagents:\n  main: []\ninputs:\n  - {at: 0s, submit: go}\n  - {at: 1s, cancel: ghost}\n"
	if err := loadErr(t, src); err.Line != 6 || err.Col != 22 || err.Path != "inputs[1].cancel" {
		t.Fatalf("cancel: %q at %d:%d, want 6:22", err, err.Line, err.Col)
	}
}

// TestLoadFSNameUsedTwice: two files with one name: the second is refused
// at its name.
func TestLoadFSNameUsedTwice(t *testing.T) {
	fsys := fstest.MapFS{
		"a.yaml": {Data: []byte("name: same\nagents: {main: []}\n")},
		"b.yaml": {Data: []byte("agents: {main: []}\nname: same\n")},
	}
	_, err := LoadFS(fsys, ".", "dir")
	want := `dir/b.yaml:2:7: name: "same" is already used by dir/a.yaml`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

// TestFormatDefaults: the defaults the tags write are the documented
// constants, and the loader fills them in.
func TestFormatDefaults(t *testing.T) {
	want := map[string]any{"seed": uint64(1), "first_token": DefaultFirstToken, "rate": DefaultRate}
	got := map[string]any{}
	var walk func(p *typePlan)
	seen := map[*typePlan]bool{}
	walk = func(p *typePlan) {
		if seen[p] {
			return
		}
		seen[p] = true
		for _, f := range p.fields {
			if f.def.IsValid() {
				got[f.name] = f.def.Interface()
			}
			walk(f.plan)
		}
		if p.elem != nil {
			walk(p.elem)
		}
	}
	walk(scenarioPlan())
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tag defaults %v, want %v", got, want)
	}
	s := mustLoad(t, "name: d\nagents:\n  main: [{text: hi}]\n")
	if r := s.Agents["main"][0]; s.Seed != 1 || r.FirstToken != DefaultFirstToken || r.Rate != DefaultRate {
		t.Fatalf("seed %d, reply %+v", s.Seed, r)
	}
}

// TestFormatRefusesBadTags: a tag the format cannot honour is a
// programming error, reported at once with the field's name.
func TestFormatRefusesBadTags(t *testing.T) {
	type unknownOption struct {
		A string `scenario:"a,sometimes"`
	}
	type badDefault struct {
		A time.Duration `scenario:"a,default=soon"`
	}
	type flowLeaf struct {
		A string `scenario:"a,flow"`
	}
	type noCheck struct {
		A int `scenario:"a,check=prime"`
	}
	type intKeys struct {
		A map[int]string `scenario:"a"`
	}
	type modeAlone struct {
		M CancelMode `scenario:"m"`
	}
	type nested struct {
		L []string `scenario:"l"`
	}
	type flowNested struct {
		A []nested `scenario:"a,flow"`
	}
	type checkOnWrongKind struct {
		A map[string]string `scenario:"a,check=positive"`
	}
	for _, c := range []struct {
		t    reflect.Type
		want string
	}{
		{reflect.TypeFor[unknownOption](), `unknownOption.A: unknown option "sometimes"`},
		{reflect.TypeFor[badDefault](), `badDefault.A: bad default "soon"`},
		{reflect.TypeFor[flowLeaf](), "flowLeaf.A: flow is for lists of structs"},
		{reflect.TypeFor[noCheck](), `noCheck.A: no check "prime"`},
		{reflect.TypeFor[intKeys](), "map keys must be strings"},
		{reflect.TypeFor[modeAlone](), "modeAlone.M: a CancelMode needs with="},
		{reflect.TypeFor[flowNested](), "flowNested.A: flow items hold values only, not []string"},
		{reflect.TypeFor[checkOnWrongKind](), "checkOnWrongKind.A: check=positive does not read a map[string]string"},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), c.want) {
					t.Errorf("%v: panic %v, want %q", c.t, r, c.want)
				}
			}()
			planOf(c.t, map[reflect.Type]*typePlan{})
		}()
	}
}

// TestLoadLocatesSyntaxErrors: yaml.v3 leaves the line out of an error on
// the first line and out of an alias to an unknown anchor; the loader puts
// it back.
func TestLoadLocatesSyntaxErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`"`, "bad.yaml:1: YAML syntax: found unexpected end of stream"},
		{"\tname: t", "bad.yaml:1: YAML syntax: found character that cannot start any token"},
		{"name: &x t\nabout: *y\n", "bad.yaml:2:8: YAML syntax: unknown anchor 'y' referenced"},
		{"name: t\nagents: {main: [{text: *a-b}]}\n", "bad.yaml:2:24: YAML syntax: unknown anchor 'a-b' referenced"},
	} {
		if err := loadErr(t, c.src); err.Error() != c.want {
			t.Errorf("got %q, want %q", err, c.want)
		}
	}
}

// TestLoadRefusesOversizedInput: Load bounds the bytes it is given, before
// reading any of them as YAML.
func TestLoadRefusesOversizedInput(t *testing.T) {
	big := append([]byte("name: t\nagents: {main: []}\nabout: "), make([]byte, MaxScenarioBytes)...)
	err := loadErr(t, string(big))
	if want := fmt.Sprintf("bad.yaml: file is %d bytes, the limit is %d", len(big), MaxScenarioBytes); err.Error() != want {
		t.Fatalf("got %q, want %q", err, want)
	}
}

// TestCanonicalYAML pins the canonical form on a scenario that meets every
// rule of the format: fields in declaration order, defaults and empty
// fields left out (a zero first_token is the default), {} args kept (nil
// and empty differ), an empty script [] and an empty entry {}, map keys
// quoted and sorted, calls as flow mappings, lists and args as
// encoding/json writes them, on_cancel with its delay, every limit, and
// the faults' kind-dependent defaults filled in. (Byte for byte what the
// hand-written emitter before it wrote.)
func TestCanonicalYAML(t *testing.T) {
	src := `name: canon
about: every rule of the canonical form
seed: 0
limits: {grace: 1500ms, max_calls: 3}
agents:
  main:
    - text: "say <hi> & \"bye\""
      first_token: 200ms
      rate: 50
      calls:
        - {tool: t, args: {b: 1, a: "<x>"}}
        - {tool: t, args: {}}
        - {tool: t, args_raw: '{"bad'}
        - {delegate: "c.d", prompt: go}
    - {}
    - rate: 12.5
      first_token: 0
  c.d: []
tools:
  t: {duration: 0s, on_cancel: stop}
  u: {duration: 2s, result: r, error: e, on_cancel: "delay 1.5s"}
  v: {duration: 1m, on_cancel: ignore}
faults:
  - {agent: main, fault: late_event}
  - {at: 1s, agent: main, fault: rate_limit, tool: t, after: 2}
inputs:
  - {at: 0s, submit: go}
  - {at: 1s, interject: more}
  - {at: 2s, cancel: main, turn: 1}
  - {at: 3s, shutdown: true}
expect:
  outcomes: {main: interrupted}
  llm_requests: {"c.d": 0}
  quiescent_by: 10s
  history:
    main: {marker: true, partial: false, contains: ["<a>", b], absent: []}
    "c.d": {}
`
	want := `name: "canon"
about: "every rule of the canonical form"
seed: 1
limits:
  grace: "1.5s"
  first_token_timeout: "30s"
  stall_timeout: "30s"
  tool_timeout: "2m0s"
  turn_timeout: "10m0s"
  debounce: "100ms"
  max_depth: 8
  max_children: 16
  max_agents: 64
  max_requests: 50
  max_message_bytes: 1048576
  max_calls: 3
  max_parallel_tools: 8
  max_parallel_requests: 8
  approval_timeout: "5m0s"
  context_window: 0
  compact_percent: 80
agents:
  "c.d": []
  "main":
    - text: "say <hi> & \"bye\""
      calls:
        - {tool: "t", args: {"a":"\u003cx\u003e","b":1}}
        - {tool: "t", args: {}}
        - {tool: "t", args_raw: "{\"bad"}
        - {delegate: "c.d", prompt: "go"}
    - {}
    - rate: 12.5
tools:
  "t":
    duration: "0s"
  "u":
    duration: "2s"
    result: "r"
    error: "e"
    on_cancel: "delay 1.5s"
  "v":
    duration: "1m0s"
    on_cancel: "ignore"
faults:
  - at: "0s"
    agent: "main"
    fault: "late_event"
    delay: "5s"
  - at: "1s"
    agent: "main"
    fault: "rate_limit"
    tool: "t"
    after: 2
    retry_after: "1s"
    attempts: 1
inputs:
  - at: "0s"
    submit: "go"
  - at: "1s"
    interject: "more"
  - at: "2s"
    cancel: "main"
    turn: 1
  - at: "3s"
    shutdown: true
expect:
  outcomes:
    "main": "interrupted"
  llm_requests:
    "c.d": 0
  quiescent_by: "10s"
  history:
    "c.d": {}
    "main":
      marker: true
      partial: false
      contains: ["\u003ca\u003e","b"]
`
	if got := string(mustLoad(t, src).YAML()); got != want {
		t.Fatalf("canonical form:\n%s\nwant:\n%s", got, want)
	}
}
