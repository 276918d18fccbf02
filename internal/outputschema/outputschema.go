// Package outputschema checks a final answer against a JSON Schema: the
// answer `--output-schema FILE` asks for must be JSON valid against the
// schema, and an answer that is not is a typed failure saying where it is
// invalid (docs/live.md, "Model settings").
//
// It is built on github.com/santhosh-tekuri/jsonschema/v6, chosen over
// github.com/google/jsonschema-go (already in the module graph through the
// MCP SDK) because it passes the JSON-Schema-Test-Suite for every draft,
// asserts formats ("date", "email", …) when asked, and reports each error
// at the answer's own location (a JSON pointer into the answer), which is
// what a user fixing a prompt needs; google/jsonschema-go names the
// schema's location and does not check formats. It loads no URL but
// files: a $ref to http(s) is an error, never a network fetch.
package outputschema

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled JSON Schema for a final answer.
type Schema struct {
	name   string
	raw    json.RawMessage
	schema *jsonschema.Schema
}

// Load reads and compiles the schema in the file at path; errors name the
// file.
func Load(path string) (*Schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("output schema %s: %w", path, err)
	}
	return compile(path, "file://"+filepath.ToSlash(abs), b)
}

// Compile compiles the schema raw; name says where it came from in errors.
func Compile(name string, raw []byte) (*Schema, error) {
	return compile(name, "file:///"+url(name), raw)
}

func url(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ' ' || r == '#' || r == '?' || r == '%' {
			return '_'
		}
		return r
	}, name)
}

func compile(name, loc string, raw []byte) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("output schema %s: not JSON: %w", name, err)
	}
	if _, ok := doc.(map[string]any); !ok {
		if _, ok := doc.(bool); !ok {
			return nil, fmt.Errorf("output schema %s: a schema is a JSON object (or true or false)", name)
		}
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("output schema %s: %w", name, err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("output schema %s: %w", name, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, fmt.Errorf("output schema %s: %w", name, err)
	}
	return &Schema{name: name, raw: compact.Bytes(), schema: s}, nil
}

// Raw is the schema's JSON, as an adapter sends it for structured output.
func (s *Schema) Raw() json.RawMessage { return s.raw }

// Name is where the schema came from (its file).
func (s *Schema) Name() string { return s.name }

// InvalidError is a final answer that does not meet the schema: each
// problem at its place in the answer.
type InvalidError struct {
	// Schema names the schema (its file).
	Schema string
	// Problems are what is wrong, each where it is, sorted by location
	// (the whole answer first), then message: the same answer always
	// reads the same.
	Problems []Problem
}

// Problem is one way an answer fails its schema.
type Problem struct {
	// Location is a JSON pointer into the answer ("/items/0/price"); ""
	// is the whole answer.
	Location string
	// Message says what is wrong there.
	Message string
}

// ErrInvalid is what every *InvalidError matches with errors.Is.
var ErrInvalid = errors.New("the final answer does not match the output schema")

func (e *InvalidError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the final answer does not match the output schema %s:", e.Schema)
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte(';')
		}
		loc := p.Location
		if loc == "" {
			loc = "the answer"
		}
		fmt.Fprintf(&b, " at %s: %s", loc, p.Message)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// printer words the library's messages.
var printer = message.NewPrinter(language.English)

// Validate checks a final answer: JSON (surrounding white space and one
// enclosing Markdown code fence, as models without structured output write
// it, are allowed) valid against the schema. It returns nil, or an
// *InvalidError.
func (s *Schema) Validate(answer string) error {
	text := unfence(answer)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return &InvalidError{Schema: s.name, Problems: []Problem{{Message: "not JSON: " + notJSON(text, err)}}}
	}
	err = s.schema.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &InvalidError{Schema: s.name, Problems: []Problem{{Message: err.Error()}}}
	}
	out := &InvalidError{Schema: s.name}
	leaves(ve, func(e *jsonschema.ValidationError) {
		p := Problem{Location: pointer(e.InstanceLocation), Message: e.ErrorKind.LocalizedString(printer)}
		if !slices.Contains(out.Problems, p) {
			out.Problems = append(out.Problems, p)
		}
	})
	slices.SortFunc(out.Problems, func(a, b Problem) int {
		return cmp.Or(strings.Compare(a.Location, b.Location), strings.Compare(a.Message, b.Message))
	})
	return out
}

// leaves calls fn for each error without causes, depth first.
func leaves(e *jsonschema.ValidationError, fn func(*jsonschema.ValidationError)) {
	if len(e.Causes) == 0 {
		fn(e)
		return
	}
	for _, c := range e.Causes {
		leaves(c, fn)
	}
}

// pointer writes a JSON pointer (RFC 6901).
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// unfence drops white space around the answer and one Markdown code fence
// enclosing it (```json … ```).
func unfence(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	body := strings.TrimSuffix(s, "```")
	nl := strings.IndexByte(body, '\n')
	if nl < 0 {
		return s
	}
	if lang := strings.TrimSpace(body[3:nl]); lang != "" && !strings.EqualFold(lang, "json") {
		return s
	}
	return strings.TrimSpace(body[nl+1:])
}

// notJSON says why text is not JSON, and where.
func notJSON(text string, err error) string {
	if text == "" {
		return "the answer is empty"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	return err.Error()
}
