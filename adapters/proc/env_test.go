package proc

import (
	"slices"
	"strings"
	"testing"
)

// TestEnvPolicy: by default the API key and every variable whose name holds
// KEY, SECRET, TOKEN, PASSWORD or PASSWD (any case) are withheld; a name in
// Pass gets through, except the API key.
func TestEnvPolicy(t *testing.T) {
	parent := []string{
		"PATH=/usr/bin", "HOME=/home/u", "OPENAI_API_KEY=sk-live", "OPENAI_BASE_URL=http://x/v1",
		"MY_GITHUB_TOKEN=ghp", "db_password=hunter2", "AWS_SECRET_ACCESS_KEY=aws", "AWS_REGION=eu-west-1",
		"Api_Key=k", "SSHPASSWD=p", "GH_TOKEN=gh", "KEYBOARD=us", "LANG=C.UTF-8", "EMPTY=", "NOEQUALS",
	}
	for _, tc := range []struct {
		name     string
		policy   EnvPolicy
		kept     []string
		withheld []string
	}{
		{"default", EnvPolicy{},
			[]string{"PATH=/usr/bin", "HOME=/home/u", "OPENAI_BASE_URL=http://x/v1", "AWS_REGION=eu-west-1", "LANG=C.UTF-8", "EMPTY=", "NOEQUALS"},
			[]string{"OPENAI_API_KEY", "MY_GITHUB_TOKEN", "db_password", "AWS_SECRET_ACCESS_KEY", "Api_Key", "SSHPASSWD", "GH_TOKEN", "KEYBOARD"}},
		{"pass two", EnvPolicy{Pass: []string{"GH_TOKEN", "KEYBOARD", "gh_token", "UNSET_TOKEN"}},
			[]string{"PATH=/usr/bin", "HOME=/home/u", "OPENAI_BASE_URL=http://x/v1", "AWS_REGION=eu-west-1", "GH_TOKEN=gh", "KEYBOARD=us", "LANG=C.UTF-8", "EMPTY=", "NOEQUALS"},
			[]string{"OPENAI_API_KEY", "MY_GITHUB_TOKEN", "db_password", "AWS_SECRET_ACCESS_KEY", "Api_Key", "SSHPASSWD"}},
		// Validate refuses this Pass; Apply still never passes the key.
		{"key never passes", EnvPolicy{Pass: []string{APIKeyVar}},
			[]string{"PATH=/usr/bin", "HOME=/home/u", "OPENAI_BASE_URL=http://x/v1", "AWS_REGION=eu-west-1", "LANG=C.UTF-8", "EMPTY=", "NOEQUALS"},
			[]string{"OPENAI_API_KEY", "MY_GITHUB_TOKEN", "db_password", "AWS_SECRET_ACCESS_KEY", "Api_Key", "SSHPASSWD", "GH_TOKEN", "KEYBOARD"}},
	} {
		got := tc.policy.Apply(parent)
		if !slices.Equal(got, tc.kept) {
			t.Errorf("%s: Apply = %q, want %q", tc.name, got, tc.kept)
		}
		if w := tc.policy.Withheld(parent); !slices.Equal(w, tc.withheld) {
			t.Errorf("%s: Withheld = %q, want %q", tc.name, w, tc.withheld)
		}
	}
	if got := (EnvPolicy{}).Apply(nil); len(got) != 0 {
		t.Errorf("Apply(nil) = %q", got)
	}
}

func TestEnvPolicyValidate(t *testing.T) {
	if err := (EnvPolicy{Pass: []string{"GH_TOKEN", "PGPASSWORD"}}).Validate(); err != nil {
		t.Errorf("valid names refused: %v", err)
	}
	for pass, want := range map[string]string{
		APIKeyVar: "OPENAI_API_KEY cannot be passed to tools: the model's API key goes only into the Authorization header",
		"A=B":     `"A=B" is not a variable name`,
		"":        "an empty variable name",
	} {
		err := (EnvPolicy{Pass: []string{"OK", pass}}).Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Pass %q: %v, want an error containing %q", pass, err, want)
		}
	}
}

// TestEnvPolicyCredentials: names with the word PAT (a personal access
// token), PWD, CREDENTIAL or AUTH, and values that are URLs with a
// password, are withheld too; the shell's PWD and OLDPWD, PATH-like names
// and git's AUTHOR variables are not secrets. A withheld variable can
// still be passed by name.
func TestEnvPolicyCredentials(t *testing.T) {
	parent := []string{
		"GH_PAT=ghp_x", "pat=p", "AZURE_DEVOPS_EXT_PAT=a", "mysql_pwd=hunter2", "DB_PWD=p", "PGPASSWORD=p",
		"GOOGLE_APPLICATION_CREDENTIALS=/k.json", "NPM_AUTH=n", "HTTP_AUTHORIZATION=Basic x", "SSH_AUTH_SOCK=/s", "XAUTHORITY=/x",
		"DATABASE_URL=postgres://app:hunter2@db:5432/app", "REDIS_URL=redis://:s3cret@cache:6379/0",
		"HTTPS_PROXY=http://user:pw@proxy:3128", "MIRRORS=https://a.example,ftp://u:p@b.example/",
		// Not secrets:
		"PATH=/usr/bin", "GOPATH=/go", "PATTERN=x*", "COMPAT_MODE=1", "PWD=/work", "OLDPWD=/", "GIT_AUTHOR_NAME=Ann",
		"GIT_AUTHOR_EMAIL=a@example.com", "AUTHORS_FILE=A", "PLAIN_URL=https://example.com/x", "GIT_URL=ssh://git@github.com:22/o/r",
		"USER_AT=http://user@host/", "PORT_URL=http://host:8080/p",
	}
	kept := []string{"PATH=/usr/bin", "GOPATH=/go", "PATTERN=x*", "COMPAT_MODE=1", "PWD=/work", "OLDPWD=/", "GIT_AUTHOR_NAME=Ann",
		"GIT_AUTHOR_EMAIL=a@example.com", "AUTHORS_FILE=A", "PLAIN_URL=https://example.com/x", "GIT_URL=ssh://git@github.com:22/o/r",
		"USER_AT=http://user@host/", "PORT_URL=http://host:8080/p"}
	withheld := []string{"GH_PAT", "pat", "AZURE_DEVOPS_EXT_PAT", "mysql_pwd", "DB_PWD", "PGPASSWORD",
		"GOOGLE_APPLICATION_CREDENTIALS", "NPM_AUTH", "HTTP_AUTHORIZATION", "SSH_AUTH_SOCK", "XAUTHORITY",
		"DATABASE_URL", "REDIS_URL", "HTTPS_PROXY", "MIRRORS"}
	if got := (EnvPolicy{}).Apply(parent); !slices.Equal(got, kept) {
		t.Errorf("Apply = %q\nwant %q", got, kept)
	}
	if got := (EnvPolicy{}).Withheld(parent); !slices.Equal(got, withheld) {
		t.Errorf("Withheld = %q\nwant %q", got, withheld)
	}
	passed := (EnvPolicy{Pass: []string{"DATABASE_URL", "GH_PAT"}}).Apply(parent)
	for _, want := range []string{"DATABASE_URL=postgres://app:hunter2@db:5432/app", "GH_PAT=ghp_x"} {
		if !slices.Contains(passed, want) {
			t.Errorf("Pass did not let %s through: %q", want, passed)
		}
	}
}

// TestEnvPolicyWithhold: a variable named by Withhold is withheld though
// nothing about it looks secret, unless Pass names it too.
func TestEnvPolicyWithhold(t *testing.T) {
	parent := []string{"PATH=/usr/bin", "UPSTREAM_CRED=c", "PROJECT=p"}
	p := EnvPolicy{Withhold: []string{"UPSTREAM_CRED", "PROJECT"}, Pass: []string{"PROJECT"}}
	if got, want := p.Apply(parent), []string{"PATH=/usr/bin", "PROJECT=p"}; !slices.Equal(got, want) {
		t.Errorf("Apply = %q, want %q", got, want)
	}
	if got, want := p.Withheld(parent), []string{"UPSTREAM_CRED"}; !slices.Equal(got, want) {
		t.Errorf("Withheld = %q, want %q", got, want)
	}
}
