package headless

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/internal/outputschema"
	"github.com/escapement/escapement/internal/userfile"
	"github.com/spf13/pflag"
)

// ModelSettings are the flags of run and chat that say what the root's
// requests ask of the model (docs/live.md, "Model settings"): each becomes
// a field of openai.Config. Like every flag, each has its ESCAPEMENT_
// variable and its configuration key (adapters/config).
type ModelSettings struct {
	temperature     string // "" sends none: 0 is a temperature
	maxOutputTokens int
	tokensField     string
	toolChoice      string
	extraBody       string // a JSON object, or @FILE holding one
	structured      string
	reasoning       string
	outputSchema    string // FILE
}

// MaxExtraBody bounds the file --extra-body @FILE reads.
const MaxExtraBody = 1 << 20

// Register adds the model settings' flags to fl.
func (s *ModelSettings) Register(fl *pflag.FlagSet) {
	fl.StringVar(&s.temperature, "temperature", "", "sampling temperature sent with every request, 0 to 2 (default: none sent, the server's own)")
	fl.IntVar(&s.maxOutputTokens, "max-output-tokens", 0, "bound every answer, reasoning included, to `N` tokens (0: none sent)")
	fl.StringVar(&s.tokensField, "output-tokens-field", "", "the field --max-output-tokens is sent in: max_tokens or max_completion_tokens (default: max_completion_tokens on api.openai.com, max_tokens elsewhere)")
	fl.StringVar(&s.toolChoice, "tool-choice", "", "tool_choice of the root's requests: auto, none, required or the name of a tool (forced); default none sent")
	fl.StringVar(&s.extraBody, "extra-body", "", "a JSON object (or @FILE holding one) merged into every request body: a provider's own parameters (top_p, seed, reasoning_effort, thinking); it may not set model, messages, stream or stream_options")
	fl.StringVar(&s.structured, "structured-output", "", "how --output-schema is sent: json_schema (the default: response_format with the schema), json_object (servers that only promise JSON) or none (nothing sent; escapement validates alone)")
	fl.StringVar(&s.reasoning, "reasoning", openai.ReasoningAuto, "which of the model's reasoning is sent back: auto (what DeepSeek and OpenRouter require with tool calls), all, or off")
	fl.StringVar(&s.outputSchema, "output-schema", "", "the root's final answer must be JSON valid against the JSON Schema in `FILE`: sent as the server's structured-output format (--structured-output) and checked by escapement; an invalid answer fails the run (exit 1) saying where")
}

// Apply puts the settings into cfg and returns the output schema (nil
// without --output-schema). Errors name the flag.
func (s *ModelSettings) Apply(cfg *openai.Config) (*outputschema.Schema, error) {
	if s.temperature != "" {
		t, err := strconv.ParseFloat(s.temperature, 64)
		if err != nil || math.IsNaN(t) || t < 0 || t > 2 {
			return nil, fmt.Errorf("--temperature %q: want a number from 0 to 2", s.temperature)
		}
		cfg.Temperature = &t
	}
	if s.maxOutputTokens < 0 {
		return nil, fmt.Errorf("--max-output-tokens %d: want a positive number (0: none)", s.maxOutputTokens)
	}
	cfg.MaxOutputTokens = s.maxOutputTokens
	if err := oneOf("--output-tokens-field", s.tokensField, "", openai.FieldMaxTokens, openai.FieldMaxCompletionTokens); err != nil {
		return nil, err
	}
	if err := oneOf("--structured-output", s.structured, "", openai.StructuredJSONSchema, openai.StructuredJSONObject, openai.StructuredNone); err != nil {
		return nil, err
	}
	if err := oneOf("--reasoning", s.reasoning, "", openai.ReasoningAuto, openai.ReasoningAll, openai.ReasoningOff); err != nil {
		return nil, err
	}
	cfg.OutputTokensField, cfg.ToolChoice, cfg.StructuredOutput, cfg.Reasoning = s.tokensField, s.toolChoice, s.structured, s.reasoning
	extra, err := s.extra()
	if err != nil {
		return nil, err
	}
	cfg.Extra = extra
	if s.outputSchema == "" {
		return nil, nil
	}
	schema, err := outputschema.Load(s.outputSchema)
	if err != nil {
		return nil, fmt.Errorf("--output-schema: %w", err)
	}
	cfg.OutputSchema = schema.Raw()
	cfg.OutputSchemaName = schemaName(s.outputSchema)
	return schema, nil
}

// extra is --extra-body: the JSON object itself, or read from @FILE.
func (s *ModelSettings) extra() (json.RawMessage, error) {
	raw, where := s.extraBody, "--extra-body"
	if raw == "" {
		return nil, nil
	}
	if path, ok := strings.CutPrefix(raw, "@"); ok {
		b, err := userfile.Read(path, MaxExtraBody)
		if err != nil {
			return nil, fmt.Errorf("--extra-body: %w", err)
		}
		raw, where = string(b), "--extra-body "+path
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &fields); err != nil || fields == nil {
		why := "not an object"
		if err != nil {
			why = err.Error()
		}
		return nil, fmt.Errorf("%s: want a JSON object such as {\"top_p\":0.9}: %s", where, why)
	}
	return json.RawMessage(raw), nil
}

// oneOf refuses a value of flag that is none of want.
func oneOf(flag, v string, want ...string) error {
	for _, w := range want {
		if v == w {
			return nil
		}
	}
	var named []string
	for _, w := range want {
		if w != "" {
			named = append(named, w)
		}
	}
	return fmt.Errorf("%s %q: want %s", flag, v, strings.Join(named, ", "))
}

// schemaName is the schema's name in response_format: the file's base
// name without its extension, in the characters OpenAI allows
// (a-z, A-Z, 0-9, _ and -), "answer" when none is left.
func schemaName(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	name := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, base)
	if strings.Trim(name, "_") == "" {
		return "answer"
	}
	return name
}
