package proc

import (
	"errors"
	"fmt"
	"strings"
)

// APIKeyVar is the variable the model's API key comes from. No policy
// passes it to a child: the key goes only into the Authorization header.
const APIKeyVar = "OPENAI_API_KEY"

// secretMarkers are the name fragments that mark a variable as a secret
// (matched case-insensitively anywhere in the name), after Codex's
// shell_environment_policy default excludes (*KEY*, *SECRET*, *TOKEN*),
// plus PASSWORD and PASSWD.
var secretMarkers = [...]string{"KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD"}

// Secret reports whether a variable's name marks it as a secret: it contains
// KEY, SECRET, TOKEN, PASSWORD or PASSWD in any case (MY_GITHUB_TOKEN,
// db_password, AWS_SECRET_ACCESS_KEY). Names like KEYBOARD_LAYOUT match too;
// a policy's Pass list lets such a variable through.
func Secret(name string) bool {
	up := strings.ToUpper(name)
	for _, m := range secretMarkers {
		if strings.Contains(up, m) {
			return true
		}
	}
	return false
}

// EnvPolicy decides which of the parent's environment variables a child
// process gets. The zero value is the default: everything except APIKeyVar
// and every variable whose name is Secret. It is a plain value; Apply is
// pure.
type EnvPolicy struct {
	// Pass names variables (exactly, case-sensitively, as the environment
	// spells them) that reach the child although their names look secret,
	// e.g. GITHUB_TOKEN for a tool that needs it. APIKeyVar cannot be
	// passed (Validate refuses it, Apply ignores it).
	Pass []string
}

// Validate refuses a Pass entry that is not a variable name, or that is
// APIKeyVar.
func (p EnvPolicy) Validate() error {
	for _, name := range p.Pass {
		switch {
		case name == "":
			return errors.New("an empty variable name cannot be passed to tools")
		case strings.ContainsAny(name, "=\x00"):
			return fmt.Errorf("%q is not a variable name (a name cannot hold '=' or NUL)", name)
		case name == APIKeyVar:
			return fmt.Errorf("%s cannot be passed to tools: the model's API key goes only into the Authorization header, never into a child process", APIKeyVar)
		}
	}
	return nil
}

// Apply returns the child's environment: the entries of parent ("NAME=value",
// as os.Environ gives them) that the policy keeps, in their order.
func (p EnvPolicy) Apply(parent []string) []string {
	child := make([]string, 0, len(parent))
	for _, kv := range parent {
		if p.keeps(envName(kv)) {
			child = append(child, kv)
		}
	}
	return child
}

// Withheld lists the names of parent's variables that Apply drops, in their
// order (for a log line that says what a tool will not see).
func (p EnvPolicy) Withheld(parent []string) []string {
	var names []string
	for _, kv := range parent {
		if name := envName(kv); !p.keeps(name) {
			names = append(names, name)
		}
	}
	return names
}

func (p EnvPolicy) keeps(name string) bool {
	if name == APIKeyVar {
		return false
	}
	if !Secret(name) {
		return true
	}
	for _, pass := range p.Pass {
		if pass == name {
			return true
		}
	}
	return false
}

// envName is the name part of "NAME=value" (the whole entry when it has no
// '=').
func envName(kv string) string {
	name, _, _ := strings.Cut(kv, "=")
	return name
}
