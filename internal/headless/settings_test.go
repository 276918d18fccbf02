package headless

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/kernel"
	"github.com/spf13/pflag"
)

// settingsFrom parses args as the model settings' flags.
func settingsFrom(t *testing.T, args ...string) *ModelSettings {
	t.Helper()
	var s ModelSettings
	fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
	s.Register(fl)
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &s
}

// TestModelSettingsApply: each flag lands in its openai.Config field
// (temperature 0 is sent, none unless given), --extra-body reads @FILE,
// the schema is named after its file, and a bad value names its flag.
func TestModelSettingsApply(t *testing.T) {
	dir := t.TempDir()
	extra := filepath.Join(dir, "extra.json")
	schema := filepath.Join(dir, "my answer.v2.json")
	os.WriteFile(extra, []byte(`{"top_p":0.5}`), 0o600)
	os.WriteFile(schema, []byte(`{"type":"object"}`), 0o600)

	var cfg openai.Config
	s := settingsFrom(t, "--temperature", "0", "--max-output-tokens", "99", "--output-tokens-field", "max_tokens",
		"--tool-choice", "required", "--extra-body", "@"+extra, "--output-schema", schema, "--structured-output", "json_object", "--reasoning", "all")
	got, err := s.Apply(&cfg)
	if err != nil || got == nil {
		t.Fatalf("Apply: %v", err)
	}
	if cfg.Temperature == nil || *cfg.Temperature != 0 || cfg.MaxOutputTokens != 99 || cfg.OutputTokensField != "max_tokens" ||
		cfg.ToolChoice != "required" || string(cfg.Extra) != `{"top_p":0.5}` || cfg.StructuredOutput != "json_object" ||
		cfg.Reasoning != "all" || string(cfg.OutputSchema) != `{"type":"object"}` || cfg.OutputSchemaName != "my_answer_v2" {
		t.Errorf("config %+v", cfg)
	}
	var none openai.Config
	if schema, err := settingsFrom(t).Apply(&none); err != nil || schema != nil || none.Temperature != nil || none.Extra != nil {
		t.Errorf("no flags: schema %v, err %v, config %+v", schema, err, none)
	}
	for _, c := range [][]string{
		{"--temperature", "2.5"}, {"--temperature", "NaN"}, {"--max-output-tokens", "-1"}, {"--output-tokens-field", "tokens"},
		{"--structured-output", "xml"}, {"--reasoning", "some"}, {"--extra-body", "[]"}, {"--extra-body", "@" + filepath.Join(dir, "none")},
		{"--output-schema", filepath.Join(dir, "none.json")},
	} {
		if _, err := settingsFrom(t, c...).Apply(&openai.Config{}); err == nil || !strings.Contains(err.Error(), c[0]) {
			t.Errorf("%v: %v", c, err)
		}
	}
}

// TestAnswersCheck: a completed root answer that fails the schema gives an
// error event and makes the turn's end failed; a valid one, a sub-agent's,
// a failed turn's and an on-demand compaction's are not checked.
func TestAnswersCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.json")
	os.WriteFile(path, []byte(`{"type":"object","required":["a"]}`), 0o600)
	var cfg openai.Config
	schema, err := settingsFrom(t, "--output-schema", path).Apply(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &Answers{Schema: schema}
	var turns Turns
	ended := func(turn uint64, agent, outcome, text string) protocol.Event {
		return protocol.Event{Type: protocol.TypeTurnEnded, Agent: agent, Turn: turn, Outcome: outcome, Text: text}
	}
	for _, ev := range []protocol.Event{
		ended(1, "main", "completed", `{"a":1}`),
		ended(1, "main/child", "completed", `not json`),
		ended(2, "main", "failed", `not json`),
		{Type: protocol.TypeCompactionStarted, Agent: "main", Turn: 3, Why: "requested"},
		ended(3, "main", "completed", ""),
	} {
		if bad, ok := a.Check(ev, &turns); ok {
			t.Errorf("%+v checked: %+v", ev, bad)
		}
	}
	bad, ok := a.Check(ended(4, "main", "completed", `{"b":2}`), &turns)
	if !ok || bad.Type != protocol.TypeError || bad.Source != protocol.SourceOutputSchema || !strings.Contains(bad.Message, "'a'") {
		t.Fatalf("an invalid answer: %+v, %v", bad, ok)
	}
	turns.Update([]kernel.Effect{{Kind: kernel.EffEmit, Life: kernel.Lifecycle{Kind: kernel.LifeTurnEnded, Agent: kernel.Root, Turn: 4, Outcome: kernel.OutcomeCompleted}}})
	if _, _, _, last := turns.Get(); last.Outcome != kernel.OutcomeFailed || !strings.Contains(last.Detail, "output schema") {
		t.Errorf("the turn's end as the command sees it: %+v", last)
	}
}
