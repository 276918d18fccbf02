package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpServer serves a testServer over streamable HTTP on loopback; down
// makes it drop every connection (a crashed or unreachable server).
type httpServer struct {
	ts      *testServer
	server  *sdk.Server
	srv     *httptest.Server
	down    atomic.Bool
	inits   atomic.Int32
	mu      sync.Mutex
	headers []string // Authorization of every request
}

func newHTTPServer(t *testing.T) *httpServer {
	h := &httpServer{ts: newTestServer()}
	server := h.ts.build()
	h.server = server
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.down.Load() {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		h.mu.Lock()
		h.headers = append(h.headers, r.Header.Get("Authorization"))
		h.mu.Unlock()
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			h.inits.Add(1)
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	return h
}

// close ends the server's sessions (one whose client vanished without a
// DELETE is still open) and the listener.
func (h *httpServer) close() {
	for ss := range h.server.Sessions() {
		ss.Close()
	}
	h.srv.Close()
}

func (h *httpServer) config() ServerConfig {
	return ServerConfig{Name: "web", File: "web.json", Type: TypeHTTP, URL: h.srv.URL, Headers: map[string]string{"Authorization": "Bearer t0ken"}}
}

// TestHTTPServer: an HTTP server's tools work with the config's headers on
// every request; a cancelled call reaches the server as
// notifications/cancelled for its request and is acknowledged.
func TestHTTPServer(t *testing.T) {
	h := newHTTPServer(t)
	defer h.close()
	ev := newEvents()
	c, err := Start(t.Context(), Options{Servers: []ServerConfig{h.config()}, Observer: ev.add, PingInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := c.Run(t.Context(), call("mcp__web__echo", `{"text":"hi"}`)); r.Status != kernel.ToolOK || r.Content != "hi" {
		t.Fatalf("echo: %+v", r)
	}
	if r := c.Run(t.Context(), call("mcp__web__progress", `{}`)); r.Content != "done" {
		t.Fatalf("progress: %+v", r)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	var r resultOf
	go func() {
		defer close(done)
		r.set(c.Run(ctx, call("mcp__web__block", `{}`)))
	}()
	<-h.ts.inHandler
	cancel()
	<-done
	if got := r.get(); got.Status != kernel.ToolCancelled || got.Content != "cancelled; the MCP server received notifications/cancelled" {
		t.Errorf("cancelled call: %+v", got)
	}
	<-h.ts.cancelled
	sent := ev.of(EventCancelSent)
	if _, cancels, _ := h.ts.snapshot(); len(sent) != 1 || !slices.Equal(cancels, []string{sent[0].RequestID}) {
		t.Errorf("cancel sent %+v, server received %v", sent, cancels)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, a := range h.headers {
		if a != "Bearer t0ken" {
			t.Errorf("request %d: Authorization %q", i, a)
		}
	}
}

// TestHTTPServerGoneAndBack: an HTTP server that drops every connection in
// the middle of a call: the session is killed (the call's broken stream or
// the keepalive ping finds it, whichever first) and the running call ends
// as an error result saying the server stopped; once the server is back,
// the next call opens a new session.
func TestHTTPServerGoneAndBack(t *testing.T) {
	h := newHTTPServer(t)
	defer h.close()
	defer h.ts.finish()
	ev := newEvents()
	c, err := Start(t.Context(), Options{Servers: []ServerConfig{h.config()}, Observer: ev.add, PingInterval: 20 * time.Millisecond, PingTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan struct{})
	var r resultOf
	go func() {
		defer close(done)
		r.set(c.Run(t.Context(), call("mcp__web__ignore", `{}`)))
	}()
	<-h.ts.inHandler
	h.down.Store(true)
	h.srv.CloseClientConnections()
	ev.next(t, EventStopped)
	<-done
	got := r.get()
	if got.Status != kernel.ToolError {
		t.Fatalf("call on the gone server: %v %q", got.Status, got.Content)
	}
	mustContain(t, "result", got.Content, `MCP server "web" (web.json) stopped during the call`)

	h.down.Store(false)
	if again := c.Run(t.Context(), call("mcp__web__echo", `{"text":"back"}`)); again.Status != kernel.ToolOK || again.Content != "back" {
		t.Fatalf("call after the server came back: %+v", again)
	}
	if n := h.inits.Load(); n != 2 {
		t.Errorf("%d sessions initialized, want 2", n)
	}
}

// TestHTTPRefusalHidesHeaderSecrets: a server that refuses the start and
// echoes the token it was sent does not put the configured header's secret
// into the error, with its scheme or without.
func TestHTTPRefusalHidesHeaderSecrets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid token ` + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + `", "got":"` + r.Header.Get("X-Api-Key") + `"}`))
	}))
	defer srv.Close()
	cfg := ServerConfig{Name: "web", File: "web.json", Type: TypeHTTP, URL: srv.URL, Headers: map[string]string{
		"Authorization": "Bearer ghp_SECRETSECRETSECRET123",
		"X-Api-Key":     "k-OTHERSECRETVALUE456",
	}}
	_, err := Start(t.Context(), Options{Servers: []ServerConfig{cfg}, PingInterval: -1})
	if err == nil {
		t.Fatal("started")
	}
	if strings.Contains(err.Error(), "SECRETSECRET") || strings.Contains(err.Error(), "OTHERSECRET") || !strings.Contains(err.Error(), "401") {
		t.Errorf("start error: %v", err)
	}
}
