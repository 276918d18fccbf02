package openai_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// TestRateLimitThenSuccess: a 429 with Retry-After is retried after the
// delay the server asked for, reported as a retry, then succeeds.
func TestRateLimitThenSuccess(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.N == 1 {
			w.Status(http.StatusTooManyRequests, `{"error":{"message":"Rate limit reached","type":"requests"}}`, "Retry-After", "1")
			return
		}
		_ = w.Answer("ok", 10)
	})
	defer srv.Close()
	s := newSink()
	m, clk := newModelClock(t, srv, nil)
	if err := m.Stream(context.Background(), request(), s); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || s.text.String() != "ok" {
		t.Fatalf("%d requests, text %q", len(reqs), s.text.String())
	}
	if len(s.retries) != 1 || s.delays[0] != time.Second || s.retries[0] != "2 HTTP 429 Too Many Requests: Rate limit reached (requests)" {
		t.Errorf("retries %q delays %v", s.retries, s.delays)
	}
	// Honoured: the adapter waited the second the server asked for.
	if got := clk.Slept(); !slices.Equal(got, []time.Duration{time.Second}) {
		t.Errorf("waited %v, want [1s]", got)
	}
}

// TestServerErrorsBackoff: 5xx and dropped connections before the first
// token are retried with jittered exponential backoff; a client error is
// not retried; exhausting the retries fails with the typed class.
func TestServerErrorsBackoff(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		switch r.N {
		case 1:
			w.Status(http.StatusServiceUnavailable, `{"error":{"message":"overloaded","type":"server_error"}}`)
		case 2:
			w.Hangup()
		case 3:
			w.Status(http.StatusBadGateway, `<html>bad gateway</html>`)
		default:
			_ = w.Answer("finally", 3)
		}
	})
	defer srv.Close()
	s := newSink()
	m, clk := newModelClock(t, srv, nil)
	if err := m.Stream(context.Background(), request(), s); err != nil {
		t.Fatal(err)
	}
	// Backoff 10ms<<n with jitter pinned to 0.5: 7.5ms, 15ms, 30ms.
	want := []time.Duration{7500 * time.Microsecond, 15 * time.Millisecond, 30 * time.Millisecond}
	if !slices.Equal(s.delays, want) || !slices.Equal(clk.Slept(), want) || s.text.String() != "finally" {
		t.Errorf("delays %v, waited %v (want %v), retries %v, text %q", s.delays, clk.Slept(), want, s.retries, s.text.String())
	}
	if !strings.Contains(s.retries[2], "HTTP 502 Bad Gateway: <html>bad gateway</html>") {
		t.Errorf("retry cause %q", s.retries[2])
	}

	bad := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Status(http.StatusNotFound, `{"error":"model \"nope\" not found"}`)
	})
	defer bad.Close()
	err := newModel(t, bad, nil).Stream(context.Background(), request(), newSink())
	if failure(err) != kernel.FailureBadResponse || len(bad.Requests()) != 1 {
		t.Errorf("404: %v (%s), %d requests", err, failure(err), len(bad.Requests()))
	}

	down := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Status(http.StatusInternalServerError, `{"error":{"message":"boom"}}`)
	})
	defer down.Close()
	err = newModel(t, down, func(c *openai.Config) { c.MaxRetries = 2 }).Stream(context.Background(), request(), newSink())
	if failure(err) != kernel.FailureServer || !strings.Contains(err.Error(), "gave up after 3 attempts") || len(down.Requests()) != 3 {
		t.Errorf("500s: %v (%s), %d requests", err, failure(err), len(down.Requests()))
	}

	// Nothing listening: connection errors are retried, then disconnect.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	clk = newClock()
	m, _ = openai.New(openai.Config{BaseURL: "http://" + addr + "/v1", Model: "m", MaxRetries: 1, RetryBase: time.Millisecond, Sleep: clk.Sleep})
	s = newSink()
	err = m.Stream(context.Background(), request(), s)
	if failure(err) != kernel.FailureDisconnect || len(s.retries) != 1 || !strings.Contains(err.Error(), "connection failed: ") {
		t.Errorf("refused: %v (%s), retries %v", err, failure(err), s.retries)
	}
}

// retryAfterOnce answers the first request with status and the given
// headers, the second with "ok", and returns the wait the adapter chose.
func retryAfterOnce(t *testing.T, status int, headers ...string) time.Duration {
	t.Helper()
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.N == 1 {
			w.Status(status, `{"error":{"message":"slow down"}}`, headers...)
			return
		}
		_ = w.Answer("ok", 10)
	})
	defer srv.Close()
	s := newSink()
	m, clk := newModelClock(t, srv, func(c *openai.Config) { c.MaxRetryWait = time.Hour })
	if err := m.Stream(context.Background(), request(), s); err != nil {
		t.Fatal(err)
	}
	slept := clk.Slept()
	if len(slept) != 1 || len(s.delays) != 1 || s.delays[0] != slept[0] {
		t.Fatalf("waited %v, reported %v: want one wait, reported as it was", slept, s.delays)
	}
	return slept[0]
}

// TestRetryAfterFractionalSeconds: delta-seconds keep their fraction
// (`Retry-After: 0.5` is half a second, not 0 and not 1).
func TestRetryAfterFractionalSeconds(t *testing.T) {
	for v, want := range map[string]time.Duration{"0.5": 500 * time.Millisecond, "1.25": 1250 * time.Millisecond, "2": 2 * time.Second} {
		if got := retryAfterOnce(t, http.StatusTooManyRequests, "Retry-After", v); got != want {
			t.Errorf("Retry-After: %s waited %v, want %v", v, got, want)
		}
	}
}

// TestRetryAfterHTTPDate: an HTTP-date Retry-After (RFC 9110: IMF-fixdate,
// the RFC 1123 form, and the two obsolete forms; not RFC 3339) is the wait
// until that time by the adapter's clock, 07:28:00 UTC here.
func TestRetryAfterHTTPDate(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"Wed, 21 Oct 2015 07:28:10 GMT":     10 * time.Second, // IMF-fixdate
		"Wednesday, 21-Oct-15 07:28:12 GMT": 12 * time.Second, // RFC 850
		"Wed Oct 21 07:28:14 2015":          14 * time.Second, // asctime
	} {
		if got := retryAfterOnce(t, http.StatusServiceUnavailable, "Retry-After", v); got != want {
			t.Errorf("Retry-After: %s waited %v, want %v", v, got, want)
		}
	}
}

// TestRetryAfterForms: OpenAI's retry-after-ms wins over Retry-After; a
// date in the past, a zero, garbage or nothing falls back to the backoff
// (7.5ms here).
func TestRetryAfterForms(t *testing.T) {
	const backoff = 7500 * time.Microsecond
	for _, tc := range []struct {
		name    string
		headers []string
		want    time.Duration
	}{
		{"retry-after-ms", []string{"Retry-After", "7", "retry-after-ms", "250"}, 250 * time.Millisecond},
		{"past date", []string{"Retry-After", "Wed, 21 Oct 2015 07:27:00 GMT"}, backoff},
		{"zero", []string{"Retry-After", "0"}, backoff},
		{"garbage", []string{"Retry-After", "soon"}, backoff},
		{"negative", []string{"Retry-After", "-3"}, backoff},
		{"none", nil, backoff},
	} {
		if got := retryAfterOnce(t, http.StatusTooManyRequests, tc.headers...); got != tc.want {
			t.Errorf("%s: waited %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRetryAfterBeyondFirstTokenBound: a Retry-After that ends past the
// first-token bound (MaxRetryWait, the CLI's --first-token-timeout) can
// never be honoured in time: the request fails at once with its own class
// (rate_limit for a 429 — the cap applies to 429s too) and the server's
// Retry-After in the error text, instead of waiting into a
// first_token_timeout.
func TestRetryAfterBeyondFirstTokenBound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		value  string
		want   kernel.Failure
		says   string
	}{
		{"429 asks 59.9s", http.StatusTooManyRequests, "59.9", kernel.FailureRateLimit, "Retry-After: 59.9 asks to wait 59.9s; the first token is due within 30s"},
		{"503 asks 45s", http.StatusServiceUnavailable, "45", kernel.FailureServer, "Retry-After: 45 asks to wait 45s"},
		{"429 asks the bound exactly", http.StatusTooManyRequests, "30", kernel.FailureRateLimit, "Retry-After: 30 asks to wait 30s"},
		{"429 asks forever", http.StatusTooManyRequests, "1e300", kernel.FailureRateLimit, "Retry-After: 1e300 asks to wait"},
		// 2^63 ns exactly: the first count a Duration cannot hold saturates too.
		{"429 asks one past the longest Duration", http.StatusTooManyRequests, "9223372036.854775808", kernel.FailureRateLimit, "Retry-After: 9223372036.854775808 asks to wait 2562047h47m16.854775807s"},
		{"429 asks forever, at length", http.StatusTooManyRequests, "1" + strings.Repeat("0", 400), kernel.FailureRateLimit, "Retry-After: 1000000000000000000000000000000000000000… asks to wait"},
		{"429 HTTP date in an hour", http.StatusTooManyRequests, "Wed, 21 Oct 2015 08:28:00 GMT", kernel.FailureRateLimit, "asks to wait 1h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				w.Status(tc.status, `{"error":{"message":"slow down"}}`, "Retry-After", tc.value)
			})
			defer srv.Close()
			s := newSink()
			m, clk := newModelClock(t, srv, func(c *openai.Config) { c.MaxRetryWait = 30 * time.Second })
			err := m.Stream(context.Background(), request(), s)
			if failure(err) != tc.want || err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "slow down") {
				t.Errorf("err %v (%s), want %s saying %q", err, failure(err), tc.want, tc.says)
			}
			if n := len(srv.Requests()); n != 1 || len(s.retries) != 0 || len(clk.Slept()) != 0 {
				t.Errorf("%d requests, retries %q, waited %v: want one request and no wait", n, s.retries, clk.Slept())
			}
		})
	}
}

// TestRetriesStopAtFirstTokenBound: time spent on failed attempts counts
// against MaxRetryWait: a server that takes 12s to fail gets a third try
// within 30s, not a fourth, and the error says why the retries stopped.
func TestRetriesStopAtFirstTokenBound(t *testing.T) {
	clk := newClock()
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		clk.Advance(12 * time.Second)
		w.Status(http.StatusServiceUnavailable, `{"error":{"message":"warming up"}}`)
	})
	defer srv.Close()
	m := newModel(t, srv, func(c *openai.Config) { c.MaxRetryWait, c.Now, c.Sleep = 30*time.Second, clk.Now, clk.Sleep })
	s := newSink()
	err := m.Stream(context.Background(), request(), s)
	if failure(err) != kernel.FailureServer || !strings.Contains(err.Error(), "HTTP 503 Service Unavailable: warming up (gave up after 3 attempts: the next retry would wait 30ms; the first token is due within 0s)") {
		t.Errorf("err %v (%s)", err, failure(err))
	}
	if n := len(srv.Requests()); n != 3 || len(s.retries) != 2 {
		t.Errorf("%d requests, retries %q: want 3 and 2", n, s.retries)
	}
}

// TestRetryWaitBoundDefaultsToFirstTokenTimeout: without MaxRetryWait the
// bound is the kernel's default first-token timeout (30s).
func TestRetryWaitBoundDefaultsToFirstTokenTimeout(t *testing.T) {
	if kernel.DefaultLimits().FirstTokenTimeout != 30*time.Second {
		t.Fatalf("the kernel's default first-token timeout moved to %v: update this test", kernel.DefaultLimits().FirstTokenTimeout)
	}
	for v, retried := range map[string]bool{"29": true, "31": false} {
		srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			if r.N == 1 {
				w.RateLimited(v)
				return
			}
			_ = w.Answer("ok", 10)
		})
		err := newModel(t, srv, nil).Stream(context.Background(), request(), newSink())
		if got := err == nil; got != retried || len(srv.Requests()) != map[bool]int{true: 2, false: 1}[retried] {
			t.Errorf("Retry-After: %s: err %v, %d requests; want retried=%v", v, err, len(srv.Requests()), retried)
		}
		srv.Close()
	}
}

// TestRetryWaitCancelled: the real wait (no Sleep configured) ends when the
// request is cancelled, and Stream returns the cancellation.
func TestRetryWaitCancelled(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.RateLimited("3600")
	})
	defer srv.Close()
	m, err := openai.New(openai.Config{BaseURL: srv.BaseURL(), Model: "m", MaxRetryWait: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := newSink()
	errc := make(chan error, 1)
	go func() { errc <- m.Stream(ctx, request(), s) }()
	<-s.retried
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Stream after cancel: %v", err)
	}
	if s.delays[0] != time.Hour || len(srv.Requests()) != 1 {
		t.Errorf("delays %v, %d requests", s.delays, len(srv.Requests()))
	}
}
