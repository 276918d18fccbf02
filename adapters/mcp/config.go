package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/escapement/escapement/adapters/proc"
	"github.com/escapement/escapement/internal/envexpand"
)

// Transport kinds of a server.
const (
	TypeStdio = "stdio" // a local process spoken to over its stdin and stdout
	TypeHTTP  = "http"  // a streamable HTTP endpoint
)

// maxConfigBytes bounds a configuration file: it is a list of servers, not
// data.
const maxConfigBytes = 1 << 20

// ServerConfig is one MCP server of a configuration file: a local command
// (TypeStdio) or a streamable HTTP endpoint (TypeHTTP). References to
// environment variables (${NAME}, ${NAME:-default}) are already expanded.
type ServerConfig struct {
	// Name is the server's key under "mcpServers"; its tools are offered
	// as mcp__Name__tool.
	Name string
	// File is the configuration file the server came from (for errors).
	File string
	// Type is TypeStdio or TypeHTTP. LoadConfig derives it from command or
	// url; a ServerConfig built in code must set it.
	Type string

	// Command, Args and Env start a stdio server. Env is added to the
	// environment the server gets (see Options.PassEnv): the variables it
	// names reach the server even when their names look secret.
	Command string
	Args    []string
	Env     map[string]string

	// URL and Headers reach an HTTP server; Headers go with every request.
	URL     string
	Headers map[string]string

	// Secrets are values that must never be shown: the client removes
	// them (and the values SecretValues finds in the configuration itself)
	// from every result, error and event it produces, and the CLI from
	// everything it prints or writes. LoadConfig sets it to every value a
	// ${NAME} reference expanded to, except the variables that name the
	// user's places and locale rather than a credential (envexpand.PlaceVar).
	Secrets []string
	// SecretVars names the variables whose values are in Secrets. No stdio
	// server inherits them from escapement's environment (the server they
	// were expanded for gets what its configuration says), and the CLI's
	// shell does not get them either.
	SecretVars []string

	// dial, when a test sets it, replaces the transport (an in-memory
	// server).
	dial dialFunc
}

// where names the server for messages: `server "NAME" (FILE)`.
func (c *ServerConfig) where() string {
	if c.File == "" {
		return fmt.Sprintf("MCP server %q", c.Name)
	}
	return fmt.Sprintf("MCP server %q (%s)", c.Name, c.File)
}

// LoadConfig reads one configuration file in the .mcp.json shape that Claude
// Code, Claude Desktop and Cursor read:
//
//	{"mcpServers": {
//	  "NAME": {"command": "npx", "args": ["-y", "pkg"], "env": {"K": "v"}},
//	  "WEB":  {"type": "http", "url": "https://host/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
//	}}
//
// Parsing is strict: an unknown field, a repeated key, a value of the wrong
// type or a missing command or url is an error naming the file, its line and
// column, and the field. "type" is "stdio" (the default when "command" is
// set) or "http" (the default when "url" is set). In command, args, env
// values, url and header values, ${NAME} is replaced by the variable's value
// and ${NAME:-default} by its value or the default; a variable that is not
// set and has no default is an error, and so is a reference to
// OPENAI_API_KEY (the model's key never leaves the Authorization header of
// the model's requests), there and as a key of env. Servers come back in
// the file's order.
func LoadConfig(path string) ([]ServerConfig, error) {
	data, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	return parseConfig(path, data, os.LookupEnv)
}

// readConfig reads a user-named file without hanging on a FIFO or filling
// memory from a device: non-blocking open, regular files only, a size bound.
func readConfig(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes; an MCP configuration lists servers", path, maxConfigBytes)
	}
	return data, nil
}

// configParser walks one file's JSON tokens, so every error can name the
// line, column and field path, and repeated keys are caught (encoding/json
// keeps the last one silently).
type configParser struct {
	file   string
	data   []byte
	dec    *json.Decoder
	lookup func(string) (string, bool)
	// keyStart is the offset of the key whose value is being read.
	keyStart int64
	// secrets collects the values expanded into the server being read,
	// secretVars the variables they came from.
	secrets, secretVars []string
}

func parseConfig(file string, data []byte, lookup func(string) (string, bool)) ([]ServerConfig, error) {
	p := &configParser{file: file, data: data, dec: json.NewDecoder(bytes.NewReader(data)), lookup: lookup}
	p.dec.UseNumber()
	var servers []ServerConfig
	sawServers := false
	err := p.object("", func(key, path string) error {
		if key != "mcpServers" {
			return p.errorfAt(p.keyStart, path, "unknown field (the file holds one field, \"mcpServers\")")
		}
		sawServers = true
		return p.object(path, func(name, path string) error {
			if strings.TrimSpace(name) == "" {
				return p.errorf(path, "a server needs a non-empty name")
			}
			s, err := p.server(name, path)
			if err != nil {
				return err
			}
			servers = append(servers, s)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, p.errorf("", "unexpected data after the top-level object")
	}
	if !sawServers {
		return nil, fmt.Errorf("%s: no \"mcpServers\" field", file)
	}
	return servers, nil
}

// server parses one server's object.
func (p *configParser) server(name, path string) (ServerConfig, error) {
	s := ServerConfig{Name: name, File: p.file}
	p.secrets, p.secretVars = nil, nil
	seen := map[string]bool{}
	start := p.dec.InputOffset()
	err := p.object(path, func(key, fpath string) error {
		seen[key] = true
		switch key {
		case "type":
			v, err := p.str(fpath)
			if err != nil {
				return err
			}
			switch v {
			case TypeStdio, TypeHTTP:
				s.Type = v
			case "sse":
				return p.errorf(fpath, "\"sse\" (the deprecated HTTP+SSE transport) is not supported; use the server's streamable HTTP endpoint with \"type\": \"http\"")
			default:
				return p.errorf(fpath, "%q: want \"stdio\" or \"http\"", v)
			}
		case "command":
			v, _, err := p.expanded(fpath)
			if err != nil {
				return err
			}
			if strings.TrimSpace(v) == "" {
				return p.errorf(fpath, "empty command")
			}
			s.Command = v
		case "args":
			return p.array(fpath, func(ipath string) error {
				v, _, err := p.expanded(ipath)
				s.Args = append(s.Args, v)
				return err
			})
		case "env":
			s.Env = map[string]string{}
			return p.object(fpath, func(k, kpath string) error {
				if err := (proc.EnvPolicy{Pass: []string{k}}).Validate(); err != nil {
					return p.errorf(kpath, "%v", err)
				}
				v, _, err := p.expanded(kpath)
				s.Env[k] = v
				return err
			})
		case "url":
			v, raw, err := p.expanded(fpath)
			if err != nil {
				return err
			}
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				// Quoted as written: what it expanded to may hold a secret.
				return p.errorf(fpath, "%q is not an http:// or https:// URL", raw)
			}
			s.URL = v
		case "headers":
			s.Headers = map[string]string{}
			return p.object(fpath, func(k, kpath string) error {
				v, _, err := p.expanded(kpath)
				s.Headers[k] = v
				return err
			})
		default:
			return p.errorfAt(p.keyStart, fpath, "unknown field (a server has type, command, args, env for a local process; type, url, headers for an HTTP endpoint)")
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	at := func() string { return p.at(start) }
	if s.Type == "" {
		switch {
		case seen["command"]:
			s.Type = TypeStdio
		case seen["url"]:
			s.Type = TypeHTTP
		default:
			return s, fmt.Errorf("%s: %s: neither \"command\" (a local server) nor \"url\" (an HTTP server)", at(), path)
		}
	}
	var wrong []string
	switch s.Type {
	case TypeStdio:
		if !seen["command"] {
			return s, fmt.Errorf("%s: %s: a stdio server needs \"command\"", at(), path)
		}
		for _, f := range []string{"url", "headers"} {
			if seen[f] {
				wrong = append(wrong, f)
			}
		}
	case TypeHTTP:
		if !seen["url"] {
			return s, fmt.Errorf("%s: %s: an http server needs \"url\"", at(), path)
		}
		for _, f := range []string{"command", "args", "env"} {
			if seen[f] {
				wrong = append(wrong, f)
			}
		}
	}
	if len(wrong) > 0 {
		return s, fmt.Errorf("%s: %s: %s does not belong to a %s server", at(), path, strings.Join(wrong, ", "), s.Type)
	}
	if len(p.secrets) > 0 {
		s.Secrets = slices.Compact(slices.Sorted(slices.Values(p.secrets)))
		s.SecretVars = slices.Compact(slices.Sorted(slices.Values(p.secretVars)))
	}
	return s, nil
}

// object reads a JSON object, calling field for each key with the decoder
// at its value (which field must consume). Repeated keys are refused.
func (p *configParser) object(path string, field func(key, path string) error) error {
	start := p.dec.InputOffset()
	tok, err := p.dec.Token()
	if err != nil {
		return p.syntax(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return p.errorfAt(start, path, "want an object, got %s", describe(tok))
	}
	var keys []string
	for p.dec.More() {
		kstart := p.dec.InputOffset()
		tok, err := p.dec.Token()
		if err != nil {
			return p.syntax(err)
		}
		key := tok.(string) // json.Decoder guarantees a string key here
		kpath := join(path, key)
		if slices.Contains(keys, key) {
			return p.errorfAt(kstart, kpath, "repeated key")
		}
		keys = append(keys, key)
		p.keyStart = kstart
		if err := field(key, kpath); err != nil {
			return err
		}
	}
	if _, err := p.dec.Token(); err != nil { // '}'
		return p.syntax(err)
	}
	return nil
}

// array reads a JSON array, calling item for each element.
func (p *configParser) array(path string, item func(path string) error) error {
	start := p.dec.InputOffset()
	tok, err := p.dec.Token()
	if err != nil {
		return p.syntax(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return p.errorfAt(start, path, "want an array of strings, got %s", describe(tok))
	}
	for i := 0; p.dec.More(); i++ {
		if err := item(fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	if _, err := p.dec.Token(); err != nil { // ']'
		return p.syntax(err)
	}
	return nil
}

// str reads a JSON string.
func (p *configParser) str(path string) (string, error) {
	start := p.dec.InputOffset()
	tok, err := p.dec.Token()
	if err != nil {
		return "", p.syntax(err)
	}
	s, ok := tok.(string)
	if !ok {
		return "", p.errorfAt(start, path, "want a string, got %s", describe(tok))
	}
	return s, nil
}

// expanded reads a JSON string and expands its ${NAME} references; the
// values they expanded to are added to the server's secrets (raw keeps
// the string as written, for errors that must not quote those).
func (p *configParser) expanded(path string) (out, raw string, err error) {
	start := p.dec.InputOffset()
	raw, err = p.str(path)
	if err != nil {
		return "", "", err
	}
	out, err = envexpand.Expand(raw, p.lookup, refuseAPIKey, func(name, value string) {
		if !envexpand.PlaceVar(name) {
			p.secrets = append(p.secrets, value)
			p.secretVars = append(p.secretVars, name)
		}
	})
	if err != nil {
		return "", "", p.errorfAt(start, path, "%v", err)
	}
	return out, raw, nil
}

// refuseAPIKey refuses a reference to the model's API key: it goes only
// into the Authorization header of the model's requests, never to an MCP
// server.
func refuseAPIKey(name string) error {
	if name == proc.APIKeyVar {
		return fmt.Errorf("${%s}: the model's API key is never passed to an MCP server (it goes only into the Authorization header of the model's requests)", name)
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return string(v)
	case string:
		return fmt.Sprintf("the string %q", v)
	case json.Number:
		return "the number " + v.String()
	case bool:
		return fmt.Sprintf("%v", v)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

// syntax turns a decoder error into file:line:col.
func (p *configParser) syntax(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// The decoder's Token reports the offending byte's offset.
		return fmt.Errorf("%s: invalid JSON: %v", p.pos(se.Offset), err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: invalid JSON: unexpected end of file", p.at(int64(len(p.data))))
	}
	return fmt.Errorf("%s: invalid JSON: %v", p.at(p.dec.InputOffset()), err)
}

func (p *configParser) errorf(path, format string, a ...any) error {
	return p.errorfAt(p.dec.InputOffset(), path, format, a...)
}

func (p *configParser) errorfAt(off int64, path, format string, a ...any) error {
	msg := fmt.Sprintf(format, a...)
	if path == "" {
		return fmt.Errorf("%s: %s", p.at(off), msg)
	}
	return fmt.Errorf("%s: %s: %s", p.at(off), path, msg)
}

// at is file:line:col of the first byte at or after offset off that is
// not white space or a separator (the decoder's offsets stop before them).
func (p *configParser) at(off int64) string {
	off = min(off, int64(len(p.data)))
	for off < int64(len(p.data)) && strings.IndexByte(" \t\r\n,:", p.data[off]) >= 0 {
		off++
	}
	return p.pos(off)
}

// pos is file:line:col of offset off.
func (p *configParser) pos(off int64) string {
	line, col := 1, 1
	for _, c := range p.data[:min(off, int64(len(p.data)))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("%s:%d:%d", p.file, line, col)
}
