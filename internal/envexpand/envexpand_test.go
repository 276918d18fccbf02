package envexpand

import (
	"errors"
	"strings"
	"testing"
)

// env is a fixed environment: SET has a value, EMPTY is set to "", UNSET
// is not set at all.
func env(name string) (string, bool) {
	switch name {
	case "SET":
		return "value", true
	case "EMPTY":
		return "", true
	case "KEY_2":
		return "k2", true
	}
	return "", false
}

// TestExpand: ${NAME} and ${NAME:-default} as a POSIX shell reads them —
// `:-` takes the default when the variable is unset or set but empty — and
// every other form kept or refused by name. used hears only the values a
// reference put in (not a default, not an empty value).
func TestExpand(t *testing.T) {
	for _, c := range []struct {
		in, want string
		used     string // the used calls, "NAME=value" joined by ","
		err      string // a part of the error, "" for none
	}{
		{in: "", want: ""},
		{in: "plain text", want: "plain text"},
		{in: "${SET}", want: "value", used: "SET=value"},
		{in: "a${SET}b${SET}c", want: "avaluebvaluec", used: "SET=value,SET=value"},
		{in: "${SET:-dflt}", want: "value", used: "SET=value"},
		{in: "${EMPTY:-dflt}", want: "dflt"}, // set but empty: the default
		{in: "${UNSET:-dflt}", want: "dflt"}, // unset: the default
		{in: "${UNSET:-}", want: ""},         // an empty default is a default
		{in: "${EMPTY}", want: ""},           // set but empty, no default: empty, not an error
		{in: "${UNSET:-a:-b}", want: "a:-b"}, // the first :- splits
		{in: "x${KEY_2}y", want: "xk2y", used: "KEY_2=k2"},
		{in: "${SET}${UNSET:-d}${EMPTY}", want: "valued", used: "SET=value"},
		{in: "$SET and $ and $$ and ${", err: "unclosed ${"},
		{in: "$SET and $ alone", want: "$SET and $ alone"}, // no braces: kept for a shell
		{in: "${UNSET}", err: "the variable UNSET is not set (write ${UNSET:-default} for a default)"},
		{in: "pre ${UNSET} post", err: "${UNSET}: the variable UNSET is not set"},
		{in: "${SET", err: `unclosed ${ in "${SET"`},
		{in: "${}", err: `"" is not a variable name`},
		{in: "${:-d}", err: `"" is not a variable name`},
		{in: "${1X}", err: `"1X" is not a variable name`},
		{in: "${A B}", err: `"A B" is not a variable name`},
		{in: "${SET-dflt}", err: `"SET-dflt" is not a variable name`}, // POSIX `-` is not supported: refused, not misread
		{in: "${SET:=x}", err: `"SET:=x" is not a variable name`},
		{in: "${_ok9}", err: "the variable _ok9 is not set"},
	} {
		var used []string
		got, err := Expand(c.in, env, nil, func(name, value string) { used = append(used, name+"="+value) })
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Expand(%q) = %q, %v; want an error holding %q", c.in, got, err, c.err)
			}
			if got != "" {
				t.Errorf("Expand(%q) returned %q beside its error", c.in, got)
			}
		case err != nil:
			t.Errorf("Expand(%q): %v", c.in, err)
		case got != c.want:
			t.Errorf("Expand(%q) = %q, want %q", c.in, got, c.want)
		}
		if c.err == "" && strings.Join(used, ",") != c.used {
			t.Errorf("Expand(%q) reported %q as used, want %q", c.in, used, c.used)
		}
	}
}

// TestExpandCheck: check sees each variable before it is read and its
// refusal is the error, whether or not the variable has a default.
func TestExpandCheck(t *testing.T) {
	refuse := errors.New("refused")
	var checked []string
	check := func(name string) error {
		checked = append(checked, name)
		if name == "SECRET" {
			return refuse
		}
		return nil
	}
	lookups := 0
	lookup := func(name string) (string, bool) {
		lookups++
		if name == "SECRET" {
			t.Errorf("a refused variable was read")
		}
		return env(name)
	}
	got, err := Expand("${SET}-${UNSET:-d}", lookup, check, func(string, string) {})
	if err != nil || got != "value-d" || strings.Join(checked, ",") != "SET,UNSET" || lookups != 2 {
		t.Errorf("got %q, %v; checked %v, %d lookups", got, err, checked, lookups)
	}
	for _, in := range []string{"${SECRET}", "${SECRET:-d}", "a ${SET} ${SECRET}"} {
		if _, err := Expand(in, lookup, check, func(string, string) {}); !errors.Is(err, refuse) {
			t.Errorf("Expand(%q): %v, want the check's error", in, err)
		}
	}
}

func TestPlaceVar(t *testing.T) {
	for _, name := range []string{"HOME", "USER", "PWD", "TMPDIR", "LANG", "PATH", "TZ", "XDG_CONFIG_HOME", "LC_ALL", "USERPROFILE"} {
		if !PlaceVar(name) {
			t.Errorf("%s is a place", name)
		}
	}
	for _, name := range []string{"OPENAI_API_KEY", "API_TOKEN", "XDG_SECRET_TOKEN", "LC_PASSWORD", "GITHUB_TOKEN", "HOMEBREW_GITHUB_API_TOKEN", "home", ""} {
		if PlaceVar(name) {
			t.Errorf("%s is taken for a place", name)
		}
	}
}
