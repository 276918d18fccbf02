package mcp

import (
	"net/url"
	"slices"
	"strings"

	"github.com/escapement/escapement/adapters/proc"
	"github.com/escapement/escapement/internal/redact"
)

// SecretValues lists what of this configuration must never be shown
// (docs/mcp.md, "What is a secret"): Secrets (LoadConfig's
// expanded values), and what the configuration itself marks as one
// whether it was expanded or written out —
//
//   - the value of an env entry whose name or value looks secret
//     (proc.Secret, proc.SecretValue: GITHUB_TOKEN, DATABASE_URL with a
//     password);
//   - the value of a header whose name looks secret (Authorization,
//     X-Api-Key) or is Cookie, also without its scheme ("Bearer ghp_…"
//     and "ghp_…");
//   - the URL's password, and the values of its query parameters whose
//     names look secret (?api_key=…, ?token=…);
//   - in args, the value of a flag whose name looks secret (--token=…,
//     or the argument after --api-key).
//
// Each value is also listed as a URL's query or path escapes it, where
// that differs, since errors quote URLs. Values are sorted, without
// repeats.
func (c *ServerConfig) SecretValues() []string {
	var out []string
	add := func(v string) {
		v = strings.TrimSpace(v)
		if v == "" {
			return
		}
		out = append(out, v, url.QueryEscape(v), url.PathEscape(v))
	}
	for _, v := range c.Secrets {
		add(v)
	}
	for k, v := range c.Env { // determinism: sorted below
		if proc.Secret(k) || proc.SecretValue(v) {
			add(v)
		}
	}
	for k, v := range c.Headers { // determinism: sorted below
		if proc.Secret(k) || strings.EqualFold(k, "Cookie") {
			add(v)
			if _, token, ok := strings.Cut(strings.TrimSpace(v), " "); ok {
				add(token)
			}
		}
	}
	if u, err := url.Parse(c.URL); err == nil && c.URL != "" {
		if pw, ok := u.User.Password(); ok {
			add(pw)
		}
		for k, vs := range u.Query() { // determinism: sorted below
			if proc.Secret(k) {
				for _, v := range vs {
					add(v)
				}
			}
		}
	}
	for i, a := range c.Args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-") || !proc.Secret(name):
		case hasValue:
			add(value)
		case i+1 < len(c.Args):
			add(c.Args[i+1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SecretVars lists every server's SecretVars, sorted, without repeats:
// the variables a process other than the server they were expanded for
// must not inherit (proc.EnvPolicy.Withhold).
func SecretVars(servers []ServerConfig) []string {
	var names []string
	for i := range servers {
		names = append(names, servers[i].SecretVars...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// secretsOf is a redactor for every server's SecretValues.
func secretsOf(servers []ServerConfig) *redact.Redactor {
	var all []string
	for i := range servers {
		all = append(all, servers[i].SecretValues()...)
	}
	return redact.New(all...)
}

// redactError returns err with the secrets of red removed from its text
// (redact.Redactor.Error: it still unwraps to err).
func redactError(red *redact.Redactor, err error) error { return red.Error(err) }
