// Package envexpand expands ${NAME} and ${NAME:-default} references to
// environment variables in configuration values (docs/mcp.md and
// docs/config.md, "What is a secret"), the one way the MCP configuration
// files and escapement's own configuration files read them. A value a
// reference put in is reported to the caller, which treats it as a secret
// unless its variable names one of the user's places (PlaceVar).
package envexpand

import (
	"fmt"
	"strings"

	"github.com/escapement/escapement/adapters/proc"
)

// PlaceVar reports whether a variable names one of the user's places or
// their locale rather than a credential (HOME, USER, PWD, TMPDIR, LANG,
// XDG_*_HOME, …): its value, often written into paths ("${HOME}/notes"),
// is shown in paths everywhere and is not a secret.
func PlaceVar(name string) bool {
	switch name {
	case "HOME", "USER", "USERNAME", "LOGNAME", "PWD", "OLDPWD", "TMPDIR", "TMP", "TEMP", "SHELL", "PATH",
		"LANG", "LANGUAGE", "TERM", "TZ", "HOSTNAME", "USERPROFILE", "APPDATA", "LOCALAPPDATA":
		return true
	}
	return (strings.HasPrefix(name, "XDG_") || strings.HasPrefix(name, "LC_")) && !proc.Secret(name)
}

// Expand replaces ${NAME} and ${NAME:-default} in s. check, when not nil,
// may refuse a variable before it is read (its error is returned); used is
// called with each variable whose value was put in (a default is the
// file's own text and is not reported). A lone "$" or "$NAME" without
// braces is kept as it is (a shell in args may want it). An unset variable
// without a default is an error naming it.
func Expand(s string, lookup func(string) (string, bool), check func(name string) error, used func(name, value string)) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unclosed ${ in %q", s)
		}
		ref := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validVarName(name) {
			return "", fmt.Errorf("${%s}: %q is not a variable name", ref, name)
		}
		if check != nil {
			if err := check(name); err != nil {
				return "", err
			}
		}
		v, ok := lookup(name)
		switch {
		case ok && v != "":
			b.WriteString(v)
			used(name, v)
		case hasDef:
			b.WriteString(def)
		case ok:
		default:
			return "", fmt.Errorf("${%s}: the variable %s is not set (write ${%s:-default} for a default)", ref, name, name)
		}
		s = s[i+end+1:]
	}
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
