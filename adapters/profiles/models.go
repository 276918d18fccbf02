package profiles

import (
	"fmt"
	"strings"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// Endpoint is where one profile's requests go (docs/config.md,
// "Profiles"): a model, an API root and the name of the variable that
// holds its key — never the key itself. An empty field is the root's.
type Endpoint struct {
	// Profile is the profile's name.
	Profile string
	// Model names the model; the root's when empty.
	Model string
	// BaseURL is the API root; the root's when empty.
	BaseURL string
	// APIKeyEnv names the environment variable holding the key. Empty, a
	// profile on the root's endpoint uses the root's key, and one on
	// another endpoint sends none: a key goes only to the server it was
	// configured for.
	APIKeyEnv string
	// Temperature and MaxOutputTokens are model settings
	// (openai.Config's): nil and 0 leave the root's.
	Temperature     *float64
	MaxOutputTokens int
}

// OpenAI builds a model for each endpoint: root is the root's
// configuration (its APIKey read from rootKeyEnv), and each profile's
// model is root's with the endpoint's model, API root and key in place.
// getenv reads the key variables. It returns the models by profile name
// and every key it read (the run's redactor must know them).
func OpenAI(root openai.Config, rootKeyEnv string, ends []Endpoint, getenv func(string) string) (map[string]ports.Model, []string, error) {
	models := make(map[string]ports.Model, len(ends))
	var keys []string
	for _, e := range ends {
		cfg := root
		if e.Temperature != nil {
			cfg.Temperature = e.Temperature
		}
		if e.MaxOutputTokens > 0 {
			cfg.MaxOutputTokens = e.MaxOutputTokens
		}
		if e.Model != "" {
			cfg.Model = e.Model
		}
		if e.BaseURL != "" {
			cfg.BaseURL = e.BaseURL
		}
		switch {
		case e.APIKeyEnv != "":
			cfg.APIKey = getenv(e.APIKeyEnv)
		case !sameEndpoint(cfg.BaseURL, root.BaseURL):
			cfg.APIKey = ""
		}
		if e.APIKeyEnv != "" && e.APIKeyEnv != rootKeyEnv && cfg.APIKey == "" {
			return nil, nil, fmt.Errorf("profile %q: $%s (its api_key_env) is not set", e.Profile, e.APIKeyEnv)
		}
		m, err := openai.New(cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("profile %q: %w", e.Profile, err)
		}
		models[e.Profile] = m
		if cfg.APIKey != "" {
			keys = append(keys, cfg.APIKey)
		}
	}
	return models, keys, nil
}

// sameEndpoint reports whether two API roots name one server's API (a
// trailing slash aside).
func sameEndpoint(a, b string) bool {
	if a == "" {
		a = openai.DefaultBaseURL
	}
	if b == "" {
		b = openai.DefaultBaseURL
	}
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// Build is the model a host with the kernel configuration kcfg streams
// from: root's model when kcfg has no profiles, else a Router sending each
// request to its profile's model (OpenAI) with its profile's tools, tools
// being root.Tools.
func Build(kcfg kernel.Config, root openai.Config, rootKeyEnv string, ends []Endpoint, getenv func(string) string) (ports.Model, error) {
	m, err := openai.New(root)
	if err != nil {
		return nil, fmt.Errorf("--base-url/--model: %w", err)
	}
	if len(kcfg.Profiles) == 0 {
		return m, nil
	}
	models, _, err := OpenAI(root, rootKeyEnv, ends, getenv)
	if err != nil {
		return nil, err
	}
	return New(kcfg, m, models, root.Tools)
}
