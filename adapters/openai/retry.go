package openai

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
	oa "github.com/sashabaranov/go-openai"
)

// Stream implements ports.Model. It retries a failed attempt before its
// first token when the failure is worth it (rate limits, server errors,
// lost connections; never authentication, not-found or invalid-request
// errors), waits what the server's Retry-After asks or a jittered backoff,
// and gives up at once when that wait would end past MaxRetryWait.
func (m *Model) Stream(ctx context.Context, req ports.Request, sink ports.Sink) error {
	body, err := m.body(req)
	if err != nil {
		return ports.Fail(kernel.FailureBadResponse, fmt.Errorf("openai: building the request: %w", err))
	}
	// go-openai is given only what it checks; the body it would send is
	// replaced by body (capturingDoer).
	creq := oa.ChatCompletionRequest{Model: m.cfg.Model}
	ctx = withBody(ctx, body)
	begun := m.cfg.Now()
	for attempt := 1; ; attempt++ {
		var thought reasoning
		started, err := m.attempt(ctx, creq, sink, &thought)
		if err == nil {
			thought.deliver(sink)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ae *attemptError
		if !errors.As(err, &ae) {
			ae = &attemptError{failure: kernel.FailureBadResponse, detail: err.Error()}
		}
		// Redact before cutting: a key straddling the cut would otherwise
		// survive as a prefix the redaction no longer recognises.
		detail := m.clean(ae.detail)
		if started && !ae.final {
			// Tokens reached the kernel: retrying would duplicate them.
			return m.fail(kernel.FailureStream, "stream broke after tokens arrived: "+detail)
		}
		if !ae.retry {
			return m.fail(ae.failure, detail)
		}
		if m.cfg.MaxRetries < 0 || attempt > m.cfg.MaxRetries {
			if attempt > 1 {
				detail += fmt.Sprintf(" (gave up after %d attempts)", attempt)
			}
			return m.fail(ae.failure, detail)
		}
		delay := m.backoff(attempt)
		if ae.retryAfter > 0 {
			delay = ae.retryAfter
		}
		if left := m.cfg.MaxRetryWait - m.cfg.Now().Sub(begun); delay >= left {
			// The first token is due before the retry could even start:
			// say why now rather than end as a first-token timeout.
			left = max(left, 0).Round(time.Millisecond)
			if ae.retryAfter > 0 {
				return m.fail(ae.failure, fmt.Sprintf("%s (%s asks to wait %v; the first token is due within %v)",
					detail, ae.retryHeader, ae.retryAfter, left))
			}
			return m.fail(ae.failure, fmt.Sprintf("%s (gave up after %d attempts: the next retry would wait %v; the first token is due within %v)",
				detail, attempt, delay.Round(time.Millisecond), left))
		}
		sink.Retry(attempt+1, delay, detail)
		if err := m.cfg.Sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// backoff is exponential with "equal jitter": half fixed, half random, so
// parallel agents that failed together do not retry together.
func (m *Model) backoff(attempt int) time.Duration {
	d := m.cfg.RetryBase << min(attempt-1, 20)
	if d > m.cfg.RetryMax || d <= 0 {
		d = m.cfg.RetryMax
	}
	return d/2 + time.Duration(m.cfg.Jitter()*float64(d/2))
}

// sleep waits d or until ctx is done (Config.Sleep's default).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
