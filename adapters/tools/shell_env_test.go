package tools

import (
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
)

// TestShellEnvPolicy: `echo $OPENAI_API_KEY` used to print the key into
// the tool result (and so to the model, the session and the trace). The
// shell gets the parent's environment minus the key and every variable
// whose name holds KEY, SECRET, TOKEN or PASSWORD; a name in PassEnv gets
// through.
func TestShellEnvPolicy(t *testing.T) {
	secrets := map[string]string{
		"OPENAI_API_KEY":        "sk-live-0123456789abcdef",
		"MY_GITHUB_TOKEN":       "ghp_0123456789abcdef",
		"db_password":           "hunter2-0123456789",
		"AWS_SECRET_ACCESS_KEY": "aws-0123456789abcdef",
		"Stripe_Api_Key":        "rk_0123456789abcdef",
	}
	for name, value := range secrets {
		t.Setenv(name, value)
	}
	t.Setenv("PASSED_TOKEN", "passed-through-value")
	t.Setenv("ESCAPEMENT_TEST_PLAIN", "plain-value")
	b, err := New(Config{Workspace: t.TempDir(), AllowShell: true, KillGrace: 300 * time.Millisecond, PassEnv: []string{"PASSED_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r := run(t, b, "shell", map[string]string{"command": `echo "key=[$OPENAI_API_KEY]"; env`})
	if r.Status != kernel.ToolOK || !strings.Contains(r.Content, "key=[]\n") {
		t.Errorf("the API key reached the shell: %q", r.Content)
	}
	for name, value := range secrets {
		if strings.Contains(r.Content, value) || strings.Contains(r.Content, name+"=") {
			t.Errorf("%s reached the shell: %q", name, r.Content)
		}
	}
	for _, want := range []string{"PASSED_TOKEN=passed-through-value\n", "ESCAPEMENT_TEST_PLAIN=plain-value\n", "PATH="} {
		if !strings.Contains(r.Content, want) {
			t.Errorf("the shell's environment lacks %q: %q", want, r.Content)
		}
	}
}
