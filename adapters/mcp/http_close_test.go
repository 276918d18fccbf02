package mcp

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
)

// holdDelete is rawHTTP with a session id, whose DELETE (the end of the
// session) is never answered: the handler holds it until the client cuts
// the request, or the test ends. cut is closed when the client cuts one.
type holdDelete struct {
	rawHTTP
	release chan struct{}
	cut     chan struct{}
	once    sync.Once
}

func (h *holdDelete) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Mcp-Session-Id", "s1")
	if r.Method != http.MethodDelete {
		h.rawHTTP.ServeHTTP(w, r)
		return
	}
	select {
	case <-r.Context().Done():
		h.once.Do(func() { close(h.cut) })
	case <-h.release:
	}
}

// TestHTTPCloseCutsAHeldDelete: closing the client ends an HTTP session
// politely (a DELETE); a server that never answers it gets KillGrace, then
// the request is cut and Close returns.
func TestHTTPCloseCutsAHeldDelete(t *testing.T) {
	h := &holdDelete{release: make(chan struct{}), cut: make(chan struct{})}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer close(h.release) // before srv.Close, which waits for the handlers
	c, err := Start(t.Context(), Options{Servers: []ServerConfig{{Name: "web", File: "web.json", Type: TypeHTTP, URL: srv.URL}},
		PingInterval: -1, KillGrace: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Run(t.Context(), call("mcp__web__echo", `{}`)); r.Status != kernel.ToolOK || r.Content != "echoed" {
		t.Fatalf("echo: %+v", r)
	}
	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	// Watchdogs, not time bounds: Close takes KillGrace here; a minute
	// without it returning, or without the server seeing its DELETE cut,
	// is a hang.
	watchdog := time.NewTimer(time.Minute)
	defer watchdog.Stop()
	for _, w := range []struct {
		done <-chan struct{}
		what string
	}{{closed, "Close did not return"}, {h.cut, "the server's held DELETE was never cut"}} {
		select {
		case <-w.done:
		case <-watchdog.C:
			t.Fatal(w.what)
		}
	}
}
