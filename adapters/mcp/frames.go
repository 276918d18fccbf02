package mcp

import (
	"encoding/json"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxMessageBytes bounds one message a server sends, on every transport:
// a stdio line, an HTTP answer's JSON body, one server-sent event. It is
// the SDK's own bound for a stdio line, so a result can be large but not
// unbounded (the model gets at most Options.OutputLimit of it).
const maxMessageBytes = sdk.DefaultMaxLineLength

// whyTooLarge is what a call whose answer is over maxMessageBytes is told,
// whatever the transport.
var whyTooLarge = fmt.Sprintf("it is larger than %d MiB, the most one MCP message may hold", maxMessageBytes>>20)

// unreadableCode is the JSON-RPC error code of the answer that stands in
// for one that could not be read (JSON-RPC's internal error).
const unreadableCode = -32603

// A server's answer that cannot be decoded (nested deeper than the SDK's
// decoder takes, a wrong version tag) or is over maxMessageBytes is not
// noise to skip, nor a reason to end the connection: if it carries the id
// of a request, that request gets an error answer at once, saying why
// (standIn), and the session goes on (docs/mcp.md, "MCP tools": one
// message is at most 16 MiB, on every transport). The transports' readers (the stdio
// stdout filter, the HTTP bodies) find the id with topScan, which reads
// only the top level of the message and so works at any depth and on a
// message cut short.

// standIn returns the error answer to request id (JSON text) that replaces
// one that could not be read, and records why for the call that waits on
// it (the tap's takeUnreadable).
func (t *tap) standIn(id, why string) []byte {
	t.mu.Lock()
	if _, ok := t.byID[id]; ok {
		t.unreadable[id] = why
	}
	t.mu.Unlock()
	msg, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      json.RawMessage(id),
		"error":   map[string]any{"code": unreadableCode, "message": "the server's answer could not be read: " + why},
	})
	return msg
}

// takeUnreadable returns, and forgets, why the answer to request id could
// not be read; ok is false when it could.
func (t *tap) takeUnreadable(id string) (why string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	why, ok = t.unreadable[id]
	delete(t.unreadable, id)
	return why, ok
}

// topScan reads a JSON object's top level as it streams by — whatever is
// nested below it, however deep — to learn what a message that cannot be
// decoded says about itself: whether it is a response (it has "jsonrpc",
// "id", and "result" or "error", and no "method") and its id. It keeps
// only the top level's keys and the id: a few bytes, whatever the size of
// the message.
type topScan struct {
	state scanState
	depth int  // nesting below the top level, inside a value
	inStr bool // in a string (a key, a value or a nested string)
	esc   bool // after a backslash in a string
	tok   []byte
	key   string
	seen  map[string]bool
	id    []byte
}

type scanState uint8

const (
	scanStart      scanState = iota // before the object
	scanWantKey                     // after '{' or ','
	scanInKey                       // in a key's string
	scanWantColon                   // after a key
	scanWantValue                   // after ':'
	scanInString                    // in a top-level string value
	scanInScalar                    // in a number, true, false or null
	scanInNested                    // in an object or array value
	scanAfterValue                  // after a value
	scanDone                        // after the closing '}'
	scanBad                         // not a JSON object
)

// maxScanToken bounds a key or id kept: the ids a client sends are short.
const maxScanToken = 256

// feed reads the next bytes of the message.
func (s *topScan) feed(b []byte) {
	for _, c := range b {
		if s.state == scanDone || s.state == scanBad {
			return
		}
		s.step(c)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (s *topScan) step(c byte) {
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr = false
		}
		switch {
		case s.state == scanInNested:
		case !s.inStr && s.state == scanInKey:
			s.key, s.state = string(s.tok), scanWantColon
		case !s.inStr: // the end of a top-level string value
			s.value(append(append([]byte{'"'}, s.tok...), '"'))
			s.state = scanAfterValue
		default:
			s.keep(c)
		}
		return
	}
	switch s.state {
	case scanStart:
		switch {
		case c == '{':
			s.state, s.seen = scanWantKey, map[string]bool{}
		case !isSpace(c):
			s.state = scanBad
		}
	case scanWantKey:
		switch {
		case c == '"':
			s.inStr, s.tok, s.state = true, s.tok[:0], scanInKey
		case c == '}':
			s.state = scanDone
		case !isSpace(c):
			s.state = scanBad
		}
	case scanWantColon:
		switch {
		case c == ':':
			s.state = scanWantValue
		case !isSpace(c):
			s.state = scanBad
		}
	case scanWantValue:
		switch {
		case isSpace(c):
		case c == '"':
			s.inStr, s.tok, s.state = true, s.tok[:0], scanInString
		case c == '{' || c == '[':
			s.value(nil)
			s.depth, s.state = 1, scanInNested
		default:
			s.tok, s.state = append(s.tok[:0], c), scanInScalar
		}
	case scanInScalar:
		if isSpace(c) || c == ',' || c == '}' {
			s.value(s.tok)
			s.state = scanAfterValue
			s.step(c)
			return
		}
		s.keep(c)
	case scanInNested:
		switch c {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth++
		case '}', ']':
			if s.depth--; s.depth == 0 {
				s.state = scanAfterValue
			}
		}
	case scanAfterValue:
		switch {
		case c == ',':
			s.state = scanWantKey
		case c == '}':
			s.state = scanDone
		case !isSpace(c):
			s.state = scanBad
		}
	}
}

// keep adds a byte of a key or top-level value, up to maxScanToken.
func (s *topScan) keep(c byte) {
	if len(s.tok) <= maxScanToken {
		s.tok = append(s.tok, c)
	}
}

// value records a top-level key's value (raw is its JSON text, nil for an
// object or array).
func (s *topScan) value(raw []byte) {
	s.seen[s.key] = true
	if s.key == "id" && len(raw) <= maxScanToken {
		s.id = append([]byte(nil), raw...)
	}
}

// response returns the id (as JSON text, in the form the tap keys requests
// by) of the response read so far; ok is false when what was read is not
// a response, or carries no usable id.
func (s *topScan) response() (id string, ok bool) {
	if s.state == scanBad || s.seen == nil || !s.seen["jsonrpc"] || s.seen["method"] || !(s.seen["result"] || s.seen["error"]) || s.id == nil {
		return "", false
	}
	var v any
	if json.Unmarshal(s.id, &v) != nil {
		return "", false
	}
	switch v.(type) {
	case string, float64:
		return idText(v), true
	}
	return "", false
}

// responseID is topScan's response for a whole message.
func responseID(msg []byte) (string, bool) {
	var s topScan
	s.feed(msg)
	return s.response()
}
