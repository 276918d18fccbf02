package profiles

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

func spec(name string) ports.ToolSpec {
	return ports.ToolSpec{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}
}

// recorder is a model that records which profile's requests reached it
// and what they offered.
type recorder struct {
	name string
	got  *[]string
}

func (r recorder) Stream(_ context.Context, req ports.Request, _ ports.Sink) error {
	var tools []string
	for _, s := range req.Tools {
		tools = append(tools, s.Name)
	}
	*r.got = append(*r.got, r.name+" "+req.Profile+" ["+strings.Join(tools, " ")+"]")
	return nil
}

// TestRouterSendsEachProfileToItsModel: a request goes to its agent's
// profile's model (the default for a profile without one, and for the
// root without a profile) and offers exactly that profile's tools, in the
// host's order, with a delegate tool only where the profile may delegate;
// the host's own delegate spec is replaced.
func TestRouterSendsEachProfileToItsModel(t *testing.T) {
	cfg := kernel.Config{Limits: kernel.DefaultLimits(), Profiles: []kernel.Profile{
		{Name: "lead", Tools: []string{"grep", "read_file"}, Delegates: []string{"reviewer"}},
		{Name: "reviewer", Description: "reviews", Tools: []string{"read_file"}},
		{Name: "helper", AllTools: true},
	}}
	var got []string
	r, err := New(cfg, recorder{"default", &got}, map[string]ports.Model{"reviewer": recorder{"small", &got}},
		[]ports.ToolSpec{spec("read_file"), spec("grep"), spec("shell"), ports.DelegateSpec("")})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"lead", "reviewer", "helper", ""} {
		if err := r.Stream(context.Background(), ports.Request{Profile: p}, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"default lead [read_file grep delegate]",
		"small reviewer [read_file]",
		"default helper [read_file grep shell]",
		"default  [read_file grep shell delegate]",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("requests\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var schema struct {
		Properties struct {
			Profile struct{ Enum []string } `json:"profile"`
		} `json:"properties"`
	}
	lead := r.Offered("lead")
	if err := json.Unmarshal(lead[len(lead)-1].Parameters, &schema); err != nil || !slices.Equal(schema.Properties.Profile.Enum, []string{"reviewer"}) {
		t.Fatalf("lead's delegate schema %s: want the profiles it may delegate to", lead[len(lead)-1].Parameters)
	}
	if r.Offered("reviewer") == nil || len(r.Offered("reviewer")) != 1 {
		t.Fatal("reviewer offers more than its tool")
	}
}

// TestRouterRefusesAToolNoServerHas: a profile naming a tool the run does
// not have is refused at start, pointing at the tool's item.
func TestRouterRefusesAToolNoServerHas(t *testing.T) {
	cfg := kernel.Config{Limits: kernel.DefaultLimits(), Profiles: []kernel.Profile{{Name: "reviewer", Tools: []string{"read_file", "read_fiel"}}}}
	_, err := New(cfg, recorder{}, nil, []ports.ToolSpec{spec("read_file")})
	var pe *kernel.ProfileError
	if !errors.As(err, &pe) || pe.Index != 0 || pe.Item != 1 || !strings.Contains(err.Error(), `"read_fiel" is no tool of this run (tools: read_file)`) {
		t.Fatalf("New = %v, want the misspelt tool named", err)
	}
}

// TestOpenAIKeysGoWhereConfigured: a profile on the root's endpoint uses
// the root's key unless it names its own variable; one on another endpoint
// without a variable sends no key (a key goes only to the server it was
// configured for; an empty API root is OpenAI's); a variable that is not
// set is an error; a model setting out of range is refused, naming the
// profile.
func TestOpenAIKeysGoWhereConfigured(t *testing.T) {
	env := map[string]string{"ROOT_KEY": "sk-root-0123456789abcdef", "OTHER_KEY": "sk-other-0123456789abcdef"}
	getenv := func(k string) string { return env[k] }
	root := openai.Config{Model: "big", BaseURL: "http://127.0.0.1:1/v1", APIKey: env["ROOT_KEY"]}
	models, keys, err := OpenAI(root, "ROOT_KEY", []Endpoint{
		{Profile: "same", Model: "small"},
		{Profile: "own", APIKeyEnv: "OTHER_KEY"},
		{Profile: "elsewhere", BaseURL: "http://127.0.0.2:1/v1"},
	}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 3 || !slices.Equal(keys, []string{env["ROOT_KEY"], env["OTHER_KEY"]}) {
		t.Fatalf("%d models, keys %q: want 3, the root's key for same, OTHER_KEY for own, none for elsewhere", len(models), keys)
	}
	// An empty API root is OpenAI's, whoever leaves it empty: a profile
	// naming OpenAI's root by hand is on the root's endpoint, and so is
	// one that names none under a root that names none.
	for _, c := range []struct{ root, profile string }{{"", ""}, {"", openai.DefaultBaseURL + "/"}, {openai.DefaultBaseURL, ""}} {
		r := openai.Config{Model: "big", BaseURL: c.root, APIKey: env["ROOT_KEY"]}
		if _, keys, err := OpenAI(r, "ROOT_KEY", []Endpoint{{Profile: "p", BaseURL: c.profile}}, getenv); err != nil || !slices.Equal(keys, []string{env["ROOT_KEY"]}) {
			t.Fatalf("root %q, profile %q: keys %q (%v), want the root's key", c.root, c.profile, keys, err)
		}
	}
	if _, _, err := OpenAI(root, "ROOT_KEY", []Endpoint{{Profile: "p", APIKeyEnv: "UNSET_KEY"}}, getenv); err == nil || !strings.Contains(err.Error(), "$UNSET_KEY (its api_key_env) is not set") {
		t.Fatalf("an unset key variable: %v", err)
	}
	temp := 7.0
	if _, _, err := OpenAI(root, "ROOT_KEY", []Endpoint{{Profile: "p", Temperature: &temp}}, getenv); err == nil || !strings.Contains(err.Error(), `profile "p": openai: temperature 7`) {
		t.Fatalf("a temperature of 7: %v, want it refused, naming the profile", err)
	}
}
