package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/fakeopenai"
)

// offeredTools are the tool names a request body offers, and the profile
// enum of its delegate tool (nil when it offers none).
func offeredTools(t *testing.T, b fakeopenai.Body) (names, profiles []string) {
	t.Helper()
	var tools []struct {
		Function struct {
			Name       string `json:"name"`
			Parameters struct {
				Properties struct {
					Profile struct{ Enum []string } `json:"profile"`
				} `json:"properties"`
			} `json:"parameters"`
		} `json:"function"`
	}
	if len(b.Tools) > 0 {
		if err := json.Unmarshal(b.Tools, &tools); err != nil {
			t.Fatalf("tools %s: %v", b.Tools, err)
		}
	}
	for _, tl := range tools {
		names = append(names, tl.Function.Name)
		if tl.Function.Name == "delegate" {
			profiles = tl.Function.Parameters.Properties.Profile.Enum
		}
	}
	return names, profiles
}

// putFile writes content to path (its directories made).
func putFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestProfilesE2E: a two-level delegation with two profiles from the
// user's configuration file against the loopback server. The root runs
// profile lead (its system prompt, its model, read_file and list_dir, and
// a delegate tool that may name reviewer only); the child runs profile
// reviewer (its own prompt, another model with its own temperature and
// output limit, read_file only). The request bodies show each agent's own
// system prompt, model, model settings and tools; the child
// asks for list_dir, outside its profile, and gets a tool error
// (not_in_profile) while its read_file runs; the live trace, its header
// holding the profiles, replays in the simulator. The old code fails it: the
// child's request went to the root's model with no system prompt and
// every tool, and list_dir ran.
func TestProfilesE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		last := r.Body.Last()
		switch {
		case r.Body.Model == "lead-model" && last.Role == "user":
			_ = w.Call(0, "d1", "delegate", `{"task":"review a.txt","profile":"reviewer","name":"rev"}`, 16)
			_ = w.End("tool_calls")
		case r.Body.Model == "lead-model":
			_ = w.Answer("Reviewed: "+last.Content, 64)
		case last.Role == "user":
			_ = w.Call(0, "c1", "list_dir", `{"path":"."}`, 16)
			_ = w.Call(1, "c2", "read_file", `{"path":"a.txt"}`, 16)
			_ = w.End("tool_calls")
		default:
			_ = w.Answer("a.txt is fine", 64)
		}
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "ws", "a.txt"), "hello\n")
	putFile(t, filepath.Join(dir, ".config", "escapement", "config.yaml"), `# the user's file, at its default place
model: lead-model
profile: lead
profiles:
  lead:
    description: plans and delegates
    system: You lead.
    tools: [read_file, list_dir]
    delegates: [reviewer]
  reviewer:
    description: reads code and reports problems
    system: You review.
    model: small-model
    temperature: 0.2
    max_output_tokens: 300
    tools: [read_file]
`)
	tr := filepath.Join(dir, "trace.jsonl")
	p := startBinary(t, bin, srv, dir, "run", "review a.txt", "--workspace", filepath.Join(dir, "ws"), "--trace", tr)
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	// The trace's header records the profiles: the simulator replays the
	// live run step for step.
	if code, out, errb := runCLI(t, "sim", "replay", tr); code != exitOK {
		t.Fatalf("sim replay of the live trace: exit %d\n%s\n%s", code, out, errb)
	}
	type seen struct {
		model, system string
		tools, enum   []string
	}
	want := map[string]seen{
		"You lead.":   {"lead-model", "You lead.", []string{"read_file", "list_dir", "delegate"}, []string{"reviewer"}},
		"You review.": {"small-model", "You review.", []string{"read_file"}, nil},
	}
	var reviewerResults []fakeopenai.Message
	for _, r := range srv.Requests() {
		b := r.Body
		got := seen{model: b.Model}
		if len(b.Messages) > 0 && b.Messages[0].Role == "system" {
			got.system = b.Messages[0].Content
		}
		got.tools, got.enum = offeredTools(t, b)
		w, ok := want[got.system]
		if !ok || got.model != w.model || !slices.Equal(got.tools, w.tools) || !slices.Equal(got.enum, w.enum) {
			t.Errorf("request %d: model %s, system %q, tools %v, delegate's profiles %v; want one of %+v", r.N, got.model, got.system, got.tools, got.enum, want)
		}
		// The reviewer's model settings go with its requests only.
		settings := strings.Contains(string(r.Raw), `"temperature":0.2`) && strings.Contains(string(r.Raw), `"max_tokens":300`)
		if settings != (got.system == "You review.") {
			t.Errorf("request %d (%s) carries the reviewer's settings: %v\n%s", r.N, got.system, settings, r.Raw)
		}
		if got.system == "You review." && b.Last().Role == "tool" {
			reviewerResults = b.Messages[len(b.Messages)-2:]
		}
	}
	if len(srv.Requests()) != 4 {
		t.Fatalf("%d requests, want 4 (lead, reviewer, reviewer, lead)", len(srv.Requests()))
	}
	if len(reviewerResults) != 2 || !strings.Contains(reviewerResults[0].Content, `"status":"refused","reason":"not_in_profile"`) ||
		!strings.Contains(reviewerResults[0].Content, `list_dir`) || reviewerResults[1].Content != "hello\n" {
		t.Fatalf("the reviewer's tool results %+v: want list_dir refused not_in_profile, read_file's content", reviewerResults)
	}
	if !strings.Contains(p.stdout.String(), "Reviewed:") {
		t.Errorf("stdout %q lacks the root's answer", p.stdout)
	}
	// Stderr names the child's profile; with --json, started names the
	// root's and every profile, delegated the child's.
	mustHave(t, p.stderr.String(), "[main] delegate → main/rev (profile reviewer): review a.txt\n")
	pj := startBinary(t, bin, srv, dir, "run", "review a.txt", "--json", "--workspace", filepath.Join(dir, "ws"))
	if code := pj.wait(t); code != exitOK {
		t.Fatalf("--json: exit %d\nstderr: %s", code, pj.stderr)
	}
	evs := jsonRun(t, pj.stdout.String())
	if st := evs[0]; st.Profile != "lead" || st.Model != "lead-model" || !slices.Equal(sorted(st.Profiles), []string{"lead", "reviewer"}) {
		t.Errorf("started: profile %q, model %q, profiles %v", st.Profile, st.Model, st.Profiles)
	}
	var delegated []string
	for _, ev := range evs {
		if ev.Type == protocol.TypeDelegated {
			delegated = append(delegated, ev.Child+" "+ev.Profile)
		}
	}
	if !slices.Equal(delegated, []string{"main/rev reviewer"}) {
		t.Errorf("delegated: %q", delegated)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestConfigPrecedenceE2E: one setting, the model, given by each source
// in turn, from the lowest to the highest — the default, the user file,
// the project file (trusted), OPENAI_MODEL, ESCAPEMENT_MODEL, the flag —
// and each time the request the server receives names the model of the
// highest source given, and config show says where it came from. The
// project file without --trust-project is ignored, and stderr says so
// (with the flag it is read). The old code fails it: it reads no file and
// no ESCAPEMENT_ variable.
func TestConfigPrecedenceE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("ok", 8)
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	userFile := filepath.Join(dir, "xdg", "escapement", "config.yaml")
	projectFile := filepath.Join(ws, ".escapement.yaml")
	base := []string{"XDG_CONFIG_HOME=" + filepath.Join(dir, "xdg")}
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		what  string
		setup func() ([]string, []string) // more environment, more flags
		model string
		src   string
	}{
		{"nothing set", func() ([]string, []string) { return nil, nil }, "gpt-4o-mini", "default"},
		{"the user file", func() ([]string, []string) {
			putFile(t, userFile, "max_depth: 2\nmodel: user-model\n")
			return nil, nil
		}, "user-model", "user " + userFile + ":2"},
		{"an untrusted project file", func() ([]string, []string) {
			putFile(t, projectFile, "\n\nmodel: project-model\n")
			return nil, nil
		}, "user-model", "user " + userFile + ":2"},
		{"the trusted project file", func() ([]string, []string) { return nil, []string{"--trust-project"} }, "project-model", "project " + projectFile + ":3"},
		{"OPENAI_MODEL", func() ([]string, []string) {
			return []string{"OPENAI_MODEL=openai-model"}, []string{"--trust-project"}
		}, "openai-model", "env OPENAI_MODEL"},
		{"ESCAPEMENT_MODEL", func() ([]string, []string) {
			return []string{"OPENAI_MODEL=openai-model", "ESCAPEMENT_MODEL=env-model"}, []string{"--trust-project"}
		}, "env-model", "env ESCAPEMENT_MODEL"},
		{"the flag", func() ([]string, []string) {
			return []string{"OPENAI_MODEL=openai-model", "ESCAPEMENT_MODEL=env-model"}, []string{"--trust-project", "--model", "flag-model"}
		}, "flag-model", "flag --model"},
	}
	for i, st := range steps {
		env, flags := st.setup()
		env = append(slices.Clone(base), env...)
		args := append([]string{"run", "hello", "--workspace", ws}, flags...)
		p := startBinaryEnv(t, bin, srv, dir, env, args...)
		if code := p.wait(t); code != exitOK {
			t.Fatalf("%s: exit %d\nstderr: %s", st.what, code, p.stderr)
		}
		reqs := srv.Requests()
		if got := reqs[len(reqs)-1].Body.Model; got != st.model || len(reqs) != i+1 {
			t.Fatalf("%s: request %d names model %q, want %q", st.what, len(reqs), got, st.model)
		}
		ignored := strings.Contains(p.stderr.String(), "ignoring "+projectFile+": a project's configuration is read only with --trust-project")
		if fileThere, trusted := i >= 2, slices.Contains(flags, "--trust-project"); ignored != (fileThere && !trusted) {
			t.Errorf("%s: stderr says the project file was ignored: %v\n%s", st.what, ignored, p.stderr)
		}
		show := startBinaryEnv(t, bin, srv, dir, env, append([]string{"config", "show", "--workspace", ws}, flags...)...)
		if code := show.wait(t); code != exitOK {
			t.Fatalf("%s: config show exit %d\n%s", st.what, code, show.stderr)
		}
		if row := settingRow(show.stdout.String(), "model"); row[1] != st.model || row[2] != st.src {
			t.Errorf("%s: config show: model %q from %q, want %q from %q", st.what, row[1], row[2], st.model, st.src)
		}
	}
}

// settingRow is config show's row of a setting: its name, value and
// source (the columns are separated by two spaces or more).
func settingRow(out, key string) [3]string {
	for _, line := range strings.Split(out, "\n") {
		cols := splitColumns(line)
		if len(cols) == 3 && cols[0] == key {
			return [3]string{cols[0], cols[1], cols[2]}
		}
	}
	return [3]string{}
}

func splitColumns(line string) []string {
	var cols []string
	for _, c := range strings.Split(line, "  ") {
		if c = strings.TrimSpace(c); c != "" {
			cols = append(cols, c)
		}
	}
	return cols
}

// TestConfigShowRedactsE2E: config show prints neither an API key (the
// root's, from OPENAI_API_KEY, nor a profile's, from the variable its
// api_key_env names) nor a value a ${NAME} reference of the file put in
// (a base URL's password and token), nor any 12-byte run of one; it says each key
// is set. The old code has no config show.
func TestConfigShowRedactsE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	const profileKey, password, token = "sk-profile-7Hq2xW9pLm4Zr8Tn", "pw-Kd83jfQ92mZx71aa", "tok-Vb61sPq0Ld7Yc3Wm"
	cfg := filepath.Join(dir, "my.yaml")
	putFile(t, cfg, `model: m
profiles:
  reviewer:
    api_key_env: REVIEWER_KEY
    base_url: "https://me:${PROXY_PASSWORD}@proxy.example/v1?token=${PROXY_TOKEN}"
    tools: [read_file]
`)
	p := startBinaryEnv(t, bin, srv, dir, []string{"REVIEWER_KEY=" + profileKey, "PROXY_PASSWORD=" + password, "PROXY_TOKEN=" + token}, "config", "show", "--config", cfg)
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\n%s", code, p.stderr)
	}
	out := p.stdout.String() + p.stderr.String()
	for _, secret := range []string{testKey, profileKey, password, token} {
		for i := 0; i+12 <= len(secret); i++ {
			if strings.Contains(out, secret[i:i+12]) {
				t.Fatalf("config show prints %q, part of a secret:\n%s", secret[i:i+12], out)
			}
		}
	}
	for _, key := range []string{"api_key", "profiles.reviewer.api_key"} {
		if row := settingRow(out, key); row[1] != "(set, not shown)" {
			t.Errorf("%s row %q: want it shown as set, not shown", key, row)
		}
	}
	if row := settingRow(out, "profiles.reviewer.base_url"); !strings.HasPrefix(row[1], "https://me:") || !strings.Contains(row[1], "@proxy.example/v1?token=") || row[2] != "user "+cfg+":5" {
		t.Errorf("the profile's base_url row %q: want the URL, its password redacted, from %s:5", row, cfg)
	}
}

// TestProfileKeyUnsetRefused: a profile whose api_key_env is not set stops
// the run before any request, a usage error naming the profile and the
// variable.
func TestProfileKeyUnsetRefused(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.Answer("hi", 1) })
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "my.yaml")
	putFile(t, cfg, "model: m\nprofiles:\n  reviewer:\n    api_key_env: REVIEWER_KEY_NOT_SET\n")
	t.Setenv("OPENAI_API_KEY", testKey)
	t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
	code, stdout, errb := runCLI(t, "run", "hello", "--config", cfg, "--workspace", dir)
	if code != exitUsage || !strings.Contains(errb, `profile "reviewer": $REVIEWER_KEY_NOT_SET (its api_key_env) is not set`) || len(srv.Requests()) != 0 {
		t.Fatalf("exit %d, %d request(s)\n%s%s", code, len(srv.Requests()), stdout, errb)
	}
}

// TestBadOTelSettingRefused: an OTEL_* setting the exporter cannot take
// stops the run before any request, a usage error naming the variable;
// the run does not go on without the telemetry it was asked for.
func TestBadOTelSettingRefused(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.Answer("hi", 1) })
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	t.Setenv("OPENAI_API_KEY", testKey)
	t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
	code, stdout, errb := runCLI(t, "run", "hello", "--workspace", dir)
	if code != exitUsage || !strings.Contains(errb, "OTEL_EXPORTER_OTLP_PROTOCOL=carrier-pigeon") || len(srv.Requests()) != 0 {
		t.Fatalf("exit %d, %d request(s)\n%s%s", code, len(srv.Requests()), stdout, errb)
	}
}
