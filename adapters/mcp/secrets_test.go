package mcp

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/kernel"
)

// testToken is an upstream credential a configuration hands a server.
const testToken = "upstream-TOKEN-7f3a9c21e5"

// TestConfigReportsSecrets: every value a ${NAME} reference expanded to is
// a secret of its server — in command, args, env, url and headers — except
// the values of the variables that name places (HOME) and a default's
// text; SecretValues adds what the configuration itself marks as secret
// whether expanded or written out (a secret-named env entry or header, the
// URL's password and api_key, the value of a --token flag).
func TestConfigReportsSecrets(t *testing.T) {
	src := `{"mcpServers": {
  "a": {"command": "${BIN}", "args": ["--upstream", "${UP}", "${HOME}/notes", "${MODE:-fast}", "--api-key", "literal-key-1", "--token=literal-token-2"],
        "env": {"PLAIN": "${PLAIN}", "GITHUB_TOKEN": "literal-gh-3", "DATABASE_URL": "postgres://app:literal-pw-4@db/app", "LEVEL": "debug"}},
  "b": {"url": "https://u:literal-pw-5@example.test/mcp?api_key=${QKEY}&region=eu&token=literal-6", "headers": {"Authorization": "Bearer ${AUTH}", "Accept": "application/json", "X-Upstream": "${HDR}"}}
}}`
	env := map[string]string{"BIN": "/opt/bin/srv", "UP": "up-value-1", "HOME": "/home/u", "PLAIN": "plain-value-2", "QKEY": "q key/3", "AUTH": "auth-value-4", "HDR": "hdr-value-5"}
	got, err := parseConfig("m.json", []byte(src), lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/opt/bin/srv", "plain-value-2", "up-value-1"}; !slices.Equal(got[0].Secrets, want) {
		t.Errorf("a: Secrets %q, want %q", got[0].Secrets, want)
	}
	if want := []string{"auth-value-4", "hdr-value-5", "q key/3"}; !slices.Equal(got[1].Secrets, want) {
		t.Errorf("b: Secrets %q, want %q", got[1].Secrets, want)
	}
	if got, want := SecretVars(got), []string{"AUTH", "BIN", "HDR", "PLAIN", "QKEY", "UP"}; !slices.Equal(got, want) {
		t.Errorf("SecretVars %q, want %q", got, want)
	}
	all := append(got[0].SecretValues(), got[1].SecretValues()...)
	for _, want := range []string{"/opt/bin/srv", "up-value-1", "plain-value-2", "literal-key-1", "literal-token-2", "literal-gh-3",
		"postgres://app:literal-pw-4@db/app", "literal-pw-5", "literal-6", "q key/3", "q+key%2F3", "Bearer auth-value-4", "auth-value-4", "hdr-value-5"} {
		if !slices.Contains(all, want) {
			t.Errorf("SecretValues lacks %q: %q", want, all)
		}
	}
	for _, not := range []string{"/home/u", "/home/u/notes", "fast", "debug", "eu", "application/json", "--upstream"} {
		if slices.Contains(all, not) {
			t.Errorf("SecretValues holds %q, which is no secret", not)
		}
	}
}

// leakConfig is a stdio test server handed testToken through the
// environment, from a configuration file's ${UPSTREAM_CRED} (a name that
// does not look secret: it is the expansion that makes it one).
func leakConfig(t *testing.T, role string) ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src := `{"mcpServers": {"leaky": {"command": "` + exe + `", "args": ["-test.run=^$"], "env": {"` + roleEnv + `": "` + role + `", "UPSTREAM": "${UPSTREAM_CRED}"}}}}`
	servers, err := parseConfig("leaky.json", []byte(src), lookup(map[string]string{"UPSTREAM_CRED": testToken}))
	if err != nil {
		t.Fatal(err)
	}
	return servers[0]
}

// noToken fails the test if text holds testToken or a 12-byte run of it.
func noToken(t *testing.T, what, text string) {
	t.Helper()
	for i := 0; i+12 <= len(testToken); i++ {
		if strings.Contains(text, testToken[i:i+12]) {
			t.Errorf("%s holds the configured token: %q", what, text)
			return
		}
	}
}

// TestStdioSecretsRedacted: a stdio server given a token by its
// configuration that prints it — in a result, on stderr before it dies
// in a call, on stderr as it fails to start — gets it to no result, no
// error and no event: the client redacts its own text. The variable the
// token was expanded from is not inherited.
func TestStdioSecretsRedacted(t *testing.T) {
	t.Setenv("UPSTREAM_CRED", testToken) // where the configuration's ${UPSTREAM_CRED} came from
	ev := newEvents()
	c, err := Start(t.Context(), Options{Servers: []ServerConfig{leakConfig(t, "serve")}, Observer: ev.add, PingInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The server gets the token as its configuration says (UPSTREAM), and
	// does not inherit the variable it was expanded from.
	env := "\n" + c.Run(t.Context(), call("mcp__leaky__env", `{}`)).Content + "\n"
	if !strings.Contains(env, "\nUPSTREAM=[redacted]\n") || strings.Contains(env, "UPSTREAM_CRED=") {
		t.Errorf("the server's environment: %q", env)
	}
	r := c.Run(t.Context(), call("mcp__leaky__leak", `{}`))
	if r.Status != kernel.ToolOK || r.Content != "the token is [redacted]" {
		t.Errorf("leak: %v %q", r.Status, r.Content)
	}
	r = c.Run(t.Context(), call("mcp__leaky__leak-exit", `{}`))
	if r.Status != kernel.ToolError {
		t.Errorf("leak-exit: %v %q", r.Status, r.Content)
	}
	mustContain(t, "leak-exit", r.Content, "stopped during the call", "upstream refused token [redacted]")
	noToken(t, "the leak-exit result", r.Content)
	ev.next(t, EventStopped)
	for _, e := range ev.every() {
		noToken(t, "event "+string(e.Kind), e.Message+" "+e.Detail)
	}

	_, err = Start(t.Context(), Options{Servers: []ServerConfig{leakConfig(t, "leak-at-start")}, PingInterval: -1})
	if err == nil {
		t.Fatal("leak-at-start started")
	}
	mustContain(t, "start error", err.Error(), "upstream refused token [redacted]")
	noToken(t, "the start error", err.Error())
}

// TestHTTPURLSecretRedacted: an HTTP server whose URL carries the token
// (?api_key=${…}) and that drops its connections during a call: the Go
// transport's error quotes the URL, and the call's result, the events and
// a failed start's error hold the token redacted.
func TestHTTPURLSecretRedacted(t *testing.T) {
	h := newHTTPServer(t)
	defer h.close()
	defer h.ts.finish()
	src := `{"mcpServers": {"web": {"url": "` + h.srv.URL + `/mcp?api_key=${WEB_KEY}"}}}`
	servers, err := parseConfig("web.json", []byte(src), lookup(map[string]string{"WEB_KEY": testToken}))
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvents()
	c, err := Start(t.Context(), Options{Servers: servers, Observer: ev.add, PingInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan struct{})
	var r resultOf
	go func() {
		defer close(done)
		r.set(c.Run(t.Context(), call("mcp__web__ignore", `{}`)))
	}()
	<-h.ts.inHandler
	h.down.Store(true)
	h.srv.CloseClientConnections()
	<-done
	got := r.get()
	mustContain(t, "result", got.Content, "stopped during the call", "api_key=[redacted]")
	noToken(t, "the result", got.Content)
	ev.next(t, EventStopped)
	for _, e := range ev.every() {
		noToken(t, "event "+string(e.Kind), e.Message+" "+e.Detail)
	}

	// A server that is not there: the start's error quotes the URL.
	h.srv.Close()
	_, err = Start(t.Context(), Options{Servers: servers, PingInterval: -1})
	if err == nil {
		t.Fatal("started without a server")
	}
	mustContain(t, "start error", err.Error(), "api_key=[redacted]")
	noToken(t, "the start error", err.Error())
}

// every is every event so far.
func (e *events) every() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.all)
}
