package proc

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// APIKeyVar is the variable the model's API key comes from. No policy
// passes it to a child: the key goes only into the Authorization header.
const APIKeyVar = "OPENAI_API_KEY"

// secretMarkers are the name fragments that mark a variable as a secret
// (matched case-insensitively anywhere in the name), after Codex's
// shell_environment_policy default excludes (*KEY*, *SECRET*, *TOKEN*),
// plus PASSWORD, PASSWD, PWD (mysql_pwd: MySQL's password variable),
// CREDENTIAL (GOOGLE_APPLICATION_CREDENTIALS, AWS_SHARED_CREDENTIALS_FILE)
// and AUTH (NPM_AUTH, HTTP_AUTHORIZATION, SSH_AUTH_SOCK, XAUTHORITY: each
// lets a process act as the user). Two names match a fragment without
// being secrets and are exempt: the shell's PWD and OLDPWD (the working
// directory), and the word AUTHOR (GIT_AUTHOR_NAME).
var secretMarkers = [...]string{"KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "PWD", "CREDENTIAL", "AUTH"}

// secretWords are the markers that count only as a whole word of a name
// (its parts between '_', '-' and '.'): PAT, a personal access token
// (GH_PAT, AZURE_DEVOPS_EXT_PAT), is a part of PATH and PATTERN too.
var secretWords = [...]string{"PAT"}

// Secret reports whether a variable's name marks it as a secret: it
// contains KEY, SECRET, TOKEN, PASSWORD, PASSWD, PWD, CREDENTIAL or AUTH in
// any case (MY_GITHUB_TOKEN, db_password, mysql_pwd, AWS_SECRET_ACCESS_KEY,
// NPM_AUTH), or has the word PAT (GH_PAT). PWD and OLDPWD themselves and
// the word AUTHOR (GIT_AUTHOR_NAME) do not count. Names like
// KEYBOARD_LAYOUT match too; a policy's Pass list lets such a variable
// through.
func Secret(name string) bool {
	up := strings.ToUpper(name)
	if up == "PWD" || up == "OLDPWD" {
		return false
	}
	for _, m := range secretMarkers {
		if m == "AUTH" {
			if hasAuth(up) {
				return true
			}
			continue
		}
		if strings.Contains(up, m) {
			return true
		}
	}
	words := strings.FieldsFunc(up, func(r rune) bool { return r == '_' || r == '-' || r == '.' })
	for _, w := range words {
		if slices.Contains(secretWords[:], w) {
			return true
		}
	}
	return false
}

// hasAuth reports whether an upper-case name holds AUTH other than as the
// word AUTHOR or AUTHORS (GIT_AUTHOR_EMAIL; but AUTHORIZATION and
// XAUTHORITY are secrets).
func hasAuth(up string) bool {
	for i := 0; ; {
		j := strings.Index(up[i:], "AUTH")
		if j < 0 {
			return false
		}
		rest := up[i+j+len("AUTH"):]
		author := strings.HasPrefix(rest, "OR")
		if author {
			after := strings.TrimPrefix(rest[2:], "S")
			author = after == "" || !isLetter(after[0])
		}
		if !author {
			return true
		}
		i += j + len("AUTH")
	}
}

func isLetter(b byte) bool { return b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' }

// credentialURL finds a URL that carries a password in its user
// information (scheme://user:password@host, or scheme://:password@host):
// DATABASE_URL=postgres://app:hunter2@db/app, a proxy with credentials.
var credentialURL = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:[^\s/?#@]+@`)

// SecretValue reports whether a variable's value is a secret whatever its
// name: it holds a URL with a password in it (docs/live.md, "The tools'
// environment").
func SecretValue(value string) bool {
	return strings.Contains(value, "://") && credentialURL.MatchString(value)
}

// EnvPolicy decides which of the parent's environment variables a child
// process gets. The zero value is the default: everything except APIKeyVar,
// every variable whose name is Secret and every variable whose value is a
// SecretValue (and those named by Withhold). It is a plain value; Apply is
// pure.
type EnvPolicy struct {
	// Pass names variables (exactly, case-sensitively, as the environment
	// spells them) that reach the child although their names or values
	// look secret, e.g. GITHUB_TOKEN or DATABASE_URL for a tool that needs
	// it. APIKeyVar cannot be passed (Validate refuses it, Apply ignores
	// it).
	Pass []string
	// Withhold names variables (exactly, as the environment spells them)
	// that do not reach the child although nothing about them looks
	// secret: the variables whose values an MCP configuration expanded
	// into a server's secrets go to that server only. Pass wins over it.
	Withhold []string
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
		if p.keeps(kv) {
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
		if !p.keeps(kv) {
			names = append(names, envName(kv))
		}
	}
	return names
}

// keeps decides one "NAME=value" entry.
func (p EnvPolicy) keeps(kv string) bool {
	name, value, _ := strings.Cut(kv, "=")
	if name == APIKeyVar {
		return false
	}
	if !Secret(name) && !SecretValue(value) && !slices.Contains(p.Withhold, name) {
		return true
	}
	return slices.Contains(p.Pass, name)
}

// envName is the name part of "NAME=value" (the whole entry when it has no
// '=').
func envName(kv string) string {
	name, _, _ := strings.Cut(kv, "=")
	return name
}
