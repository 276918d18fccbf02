package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"strconv"
)

// A server or proxy that ignores stream:true answers a whole chat.completion
// as application/json. Several do (some LiteLLM and gateway setups, servers
// whose streaming is switched off), and the answer is as good as a streamed
// one, so it is read as one: jsonBody turns it into the one event it stands
// for (the message as the delta, its finish_reason and usage) and [DONE],
// and the stream is judged like any other — a "length" finish is still a
// truncation. A JSON error object with status 200 becomes an error event.
// Any other JSON is left as it is, and fails as "not an event stream".

// isJSON reports whether a Content-Type names JSON (application/json, with
// parameters or not, or a +json type) and not an event stream.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || (len(mt) > 5 && mt[len(mt)-5:] == "+json")
}

// jsonBody reads a JSON response whole (at most maxLine bytes; a longer one
// is passed on untouched) and, when it is a chat.completion or an error
// object, returns the event stream it stands for. A body that does not
// start with '{' (an event stream sent with the wrong type) is passed on
// as it is, without waiting for its end.
func (d *capturingDoer) jsonBody(body io.ReadCloser) io.ReadCloser {
	r := bufio.NewReader(body)
	for {
		c, err := r.ReadByte()
		if err != nil {
			return readCloser{r, body}
		}
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			_ = r.UnreadByte()
			if c != '{' {
				return readCloser{r, body}
			}
			break
		}
	}
	limit := d.maxLine
	if limit <= 0 {
		limit = MaxLineFor(1 << 20)
	}
	raw, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		// The connection broke before the answer was whole: what came is
		// passed on, then the break itself, so the request ends as the
		// disconnect it was (and is retried), not as a malformed body.
		return readCloser{io.MultiReader(bytes.NewReader(raw), failingReader{err}), body}
	}
	if len(raw) <= limit {
		if events, ok := completionEvents(raw); ok {
			return readCloser{bytes.NewReader(events), body}
		}
	}
	return readCloser{io.MultiReader(bytes.NewReader(raw), r), body}
}

// failingReader returns its error: a read that broke, replayed.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

// readCloser reads from one reader and closes the connection's body.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

// completionEvents converts a chat.completion object to its event stream,
// or an error object to an error event.
func completionEvents(raw []byte) ([]byte, bool) {
	var flat bytes.Buffer
	if json.Compact(&flat, raw) != nil {
		return nil, false
	}
	if isErrorEvent(flat.Bytes()) {
		return append(append([]byte("data: "), flat.Bytes()...), "\n\n"...), true
	}
	var v struct {
		Choices []struct {
			Index                int                        `json:"index"`
			Message              map[string]json.RawMessage `json:"message"`
			FinishReason         json.RawMessage            `json:"finish_reason"`
			ContentFilterResults json.RawMessage            `json:"content_filter_results"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(flat.Bytes(), &v) != nil || len(v.Choices) == 0 {
		return nil, false
	}
	type choice struct {
		Index                int                        `json:"index"`
		Delta                map[string]json.RawMessage `json:"delta"`
		FinishReason         json.RawMessage            `json:"finish_reason,omitempty"`
		ContentFilterResults json.RawMessage            `json:"content_filter_results,omitempty"`
	}
	var chunk struct {
		Choices []choice        `json:"choices"`
		Usage   json.RawMessage `json:"usage,omitempty"`
	}
	for _, c := range v.Choices {
		if c.Message == nil {
			return nil, false // not a chat.completion
		}
		if tc, ok := c.Message["tool_calls"]; ok {
			// A stream's call fragments carry an index; a message's calls
			// are in order.
			var calls []map[string]json.RawMessage
			if json.Unmarshal(tc, &calls) == nil {
				for i, call := range calls {
					if _, has := call["index"]; !has {
						call["index"] = json.RawMessage(strconv.Itoa(i))
					}
				}
				c.Message["tool_calls"], _ = json.Marshal(calls)
			}
		}
		chunk.Choices = append(chunk.Choices, choice{Index: c.Index, Delta: c.Message, FinishReason: c.FinishReason, ContentFilterResults: c.ContentFilterResults})
	}
	chunk.Usage = v.Usage // read, or ignored, as a stream's last chunk's is
	line, err := json.Marshal(chunk)
	if err != nil {
		return nil, false
	}
	out := append([]byte("data: "), line...)
	return append(out, "\n\ndata: [DONE]\n\n"...), true
}
