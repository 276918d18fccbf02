package openai_test

import (
	"context"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// chunkJSON is one content chunk's payload.
func chunkJSON(text string) string {
	return `{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}`
}

const finishJSON = `{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`

// TestSSESyntaxTheSpecAllows: every event-stream layout the WHATWG
// server-sent-events grammar allows reads as the same answer — CRLF and
// lone-CR line ends, `data:` without its space, one event's data split over
// several `data:` lines (joined with "\n", which JSON reads as a space), id,
// retry and event fields, a byte-order mark before the first line, and
// hundreds of keep-alive comments before the first token (go-openai alone
// gives up after 300 lines that are not data).
func TestSSESyntaxTheSpecAllows(t *testing.T) {
	events := func(sep string, each func(payload string) string) string {
		var b strings.Builder
		for _, p := range []string{chunkJSON("Hello, "), chunkJSON("world!"), finishJSON, "[DONE]"} {
			b.WriteString(each(p) + sep)
		}
		return b.String()
	}
	lines := func(eol string) string {
		return events(eol, func(p string) string { return "data: " + p + eol })
	}
	for name, body := range map[string]string{
		"LF":             lines("\n"),
		"CRLF":           lines("\r\n"),
		"lone CR":        lines("\r"),
		"no space":       events("\n", func(p string) string { return "data:" + p + "\n" }),
		"BOM":            "\uFEFF" + lines("\n"),
		"BOM and CRLF":   "\uFEFF" + lines("\r\n"),
		"id retry event": events("\n", func(p string) string { return "id: 7\nretry: 3000\nevent: message\ndata: " + p + "\n" }),
		"multi-line data": events("\n", func(p string) string {
			return "data: " + strings.Replace(p, `"choices":`, "\"choices\":\ndata: ", 1) + "\n"
		}),
		"multi-line CRLF": events("\r\n", func(p string) string {
			return "data: " + strings.Replace(p, `"choices":`, "\"choices\":\r\ndata:", 1) + "\r\n"
		}),
		"400 comments":   strings.Repeat(": keep-alive\n\n", 400) + lines("\n"),
		"no blank lines": events("", func(p string) string { return "data: " + p + "\n" }),
	} {
		t.Run(name, func(t *testing.T) {
			srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				_ = w.Bytes(body)
			})
			defer srv.Close()
			s := newSink()
			if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if got := s.text.String(); got != "Hello, world!" || len(srv.Requests()) != 1 {
				t.Errorf("text %q, %d requests", got, len(srv.Requests()))
			}
		})
	}
}

// TestSSEEventSplitAcrossReads: an event whose lines arrive a few bytes per
// read, CRLF split between reads included, reads as one event.
func TestSSEEventSplitAcrossReads(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		body := "\uFEFFdata: " + chunkJSON("split") + "\r\n\r\ndata:" + finishJSON + "\r\n\r\ndata: [DONE]\r\n\r\n"
		for len(body) > 0 {
			k := min(3, len(body))
			_ = w.Bytes(body[:k])
			body = body[k:]
		}
	})
	defer srv.Close()
	s := newSink()
	if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := s.text.String(); got != "split" {
		t.Errorf("text %q", got)
	}
}

// TestErrorNullChunkIsAChunk: a chunk whose "error" is null, false or ""
// (first key or not) is an ordinary chunk (some proxies send it on every
// chunk), not an error event — its text arrives and the stream goes on.
func TestErrorNullChunkIsAChunk(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Raw(`data: {"error":null,"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`)
		_ = w.Raw(`data: {"error":null,"choices":[{"index":0,"delta":{"content":" wo"},"finish_reason":null}]}`)
		_ = w.Raw(`data: {"error":false,"choices":[{"index":0,"delta":{"content":"rl"},"finish_reason":null}]}`)
		_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"content":"d"},"finish_reason":null}],"error":""}`)
		_ = w.End("stop")
	})
	defer srv.Close()
	s := newSink()
	if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil || s.text.String() != "Hello world" {
		t.Fatalf("err %v, text %q", err, s.text.String())
	}
}

// TestEventsWithoutBlankLinesBoundOneByOne: events a server sends without
// the blank line between them (a leniency) are each held to MaxLineBytes on
// their own — two that fit are read — and one that does not fit is refused.
func TestEventsWithoutBlankLinesBoundOneByOne(t *testing.T) {
	big := strings.Repeat("a", 600)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Bytes("data: " + chunkJSON(big) + "\ndata: " + chunkJSON(big) + "\ndata: " + finishJSON + "\ndata: [DONE]\n")
	})
	defer srv.Close()
	s := newSink()
	if err := newModel(t, srv, func(c *openai.Config) { c.MaxLineBytes = 1000 }).Stream(context.Background(), request(), s); err != nil || s.text.Len() != 1200 {
		t.Fatalf("two events of about 700 bytes under a 1000-byte bound: err %v, %d bytes of text", err, s.text.Len())
	}
	s = newSink()
	err := newModel(t, srv, func(c *openai.Config) { c.MaxLineBytes = 650 }).Stream(context.Background(), request(), s)
	if failure(err) != kernel.FailureBadResponse || !strings.Contains(err.Error(), "went past 650 bytes") {
		t.Fatalf("an event over a 650-byte bound: err %v (%s)", err, failure(err))
	}
}
