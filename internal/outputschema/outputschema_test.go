package outputschema_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/escapement/escapement/internal/outputschema"
)

const ports = `{
  "type": "object",
  "properties": {
    "port": {"type": "string", "minLength": 1},
    "opened": {"type": "string", "format": "date"},
    "piers": {"type": "array", "items": {"$ref": "#/$defs/pier"}, "minItems": 1}
  },
  "required": ["port", "piers"],
  "additionalProperties": false,
  "$defs": {"pier": {"type": "object", "properties": {"name": {"type": "string"}, "length_m": {"type": "number", "minimum": 0}}, "required": ["name"]}}
}`

// TestValidate: a valid answer passes (bare, with white space, in a json
// code fence); an invalid one is an *InvalidError that says where, in the
// answer, each problem is — a nested field by its JSON pointer, a missing
// property at its object, a format (asserted) — and matches ErrInvalid.
func TestValidate(t *testing.T) {
	s, err := outputschema.Compile("ports.json", []byte(ports))
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{
		`{"port":"Ashby","piers":[{"name":"north"}]}`,
		"\n  {\"port\":\"Ashby\",\"opened\":\"1871-05-01\",\"piers\":[{\"name\":\"north\",\"length_m\":120}]}  \n",
		"```json\n{\"port\":\"Ashby\",\"piers\":[{\"name\":\"north\"}]}\n```",
		"```\n{\"port\":\"Ashby\",\"piers\":[{\"name\":\"north\"}]}\n```",
	} {
		if err := s.Validate(ok); err != nil {
			t.Errorf("Validate(%q): %v", ok, err)
		}
	}
	for _, tc := range []struct {
		answer string
		want   []outputschema.Problem
	}{
		{`{"port":"Ashby","piers":[{"name":"north","length_m":-3}]}`, []outputschema.Problem{{Location: "/piers/0/length_m", Message: "minimum: got -3, want 0"}}},
		{`{"port":"Ashby","piers":[{"length_m":3}]}`, []outputschema.Problem{{Location: "/piers/0", Message: "missing property 'name'"}}},
		{`{"port":"Ashby","piers":[{"name":"n"}],"opened":"1871-13-01"}`, nil},
		{`{"port":"","piers":[],"extra":1}`, nil},
		{`The port is Ashby.`, []outputschema.Problem{{Message: "not JSON"}}},
		{``, []outputschema.Problem{{Message: "not JSON: the answer is empty"}}},
		{"```python\n{\"port\":\"Ashby\",\"piers\":[{\"name\":\"n\"}]}\n```", []outputschema.Problem{{Message: "not JSON"}}},
	} {
		err := s.Validate(tc.answer)
		var ie *outputschema.InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, outputschema.ErrInvalid) || len(ie.Problems) == 0 {
			t.Errorf("Validate(%q) = %v, want an *InvalidError", tc.answer, err)
			continue
		}
		if !strings.Contains(err.Error(), "ports.json") {
			t.Errorf("the error does not name the schema: %v", err)
		}
		for i, p := range tc.want {
			if i >= len(ie.Problems) || ie.Problems[i].Location != p.Location || !strings.HasPrefix(ie.Problems[i].Message, p.Message) {
				t.Errorf("Validate(%q) problems %+v, want %+v", tc.answer, ie.Problems, tc.want)
			}
		}
	}
	err = s.Validate(`{"port":"","piers":[],"extra":1,"opened":"yesterday"}`)
	var ie *outputschema.InvalidError
	errors.As(err, &ie)
	locs := map[string]bool{}
	for _, p := range ie.Problems {
		locs[p.Location] = true
	}
	if want := map[string]bool{"": true, "/port": true, "/piers": true, "/opened": true}; !reflect.DeepEqual(locs, want) {
		t.Errorf("every problem, each at its place: %v (%v)", locs, err)
	}
}

// TestLoadRefusesBadSchemas: a schema that is not JSON, not a schema, or
// invalid against its metaschema is refused naming its file; a $ref to
// the network is refused, not fetched.
func TestLoadRefusesBadSchemas(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"notjson.json": `{"type":`,
		"array.json":   `["type"]`,
		"meta.json":    `{"type":"objekt"}`,
		"remote.json":  `{"$ref":"https://example.com/schema.json"}`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := outputschema.Load(path); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Load(%s) = %v, want an error naming it", name, err)
		}
	}
	if _, err := outputschema.Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("a missing file: %v", err)
	}
	path := filepath.Join(dir, "ok.json")
	_ = os.WriteFile(path, []byte(ports), 0o600)
	s, err := outputschema.Load(path)
	if err != nil || !strings.HasPrefix(string(s.Raw()), `{"type":"object"`) {
		t.Fatalf("Load: %v %s", err, s.Raw())
	}
}
