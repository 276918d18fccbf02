package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/otel"
)

// A live run exports its spans over OTLP when the standard variables ask
// for it (docs/otel.md): OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT. Without them lr.otel stays nil:
// nothing is started, and the observer derives nothing.

// otelStopBound is how long a run that ends waits for its last spans to be
// sent; a hard exit waits otelFlushBound.
const (
	otelStopBound  = 5 * time.Second
	otelFlushBound = 250 * time.Millisecond
)

// startOTel starts the exporter when the environment asks for one.
func (lr *liveRun) startOTel(model, baseURL string) error {
	settings, on, err := otel.FromEnv(os.Getenv)
	if err != nil {
		return usageErr("%v", err)
	}
	if !on {
		return nil
	}
	lr.otel, err = otel.New(context.Background(), otel.Config{
		Settings: settings, RootName: "main", Model: model, Provider: "openai", BaseURL: baseURL,
		Redact: lr.redact,
		OnError: func(err error) {
			lr.say("OpenTelemetry: sending spans failed: %v (later failures are counted at exit)", err)
		},
	})
	if err != nil {
		return usageErr("%v", err)
	}
	return nil
}

// otelObserve derives and hands on the spans of one live step.
func (lr *liveRun) otelObserve(s live.Step) {
	if lr.otel != nil {
		lr.otel.Observe(s)
	}
}

// otelReplay derives the spans of a step a recovery replays from the log
// of the process that died, exporting nothing: that process sent what it
// ended, and what it held open ends in this one.
func (lr *liveRun) otelReplay(s live.Step) {
	if lr.otel != nil {
		lr.otel.Replay(s)
	}
}

// otelCrashedAt tells the exporter when the process whose log is at path
// stopped: the log's last write.
func (lr *liveRun) otelCrashedAt(path string) {
	if lr.otel == nil {
		return
	}
	if st, err := os.Stat(path); err == nil {
		lr.otel.SetCrashTime(st.ModTime())
	}
}

// otelConversation names the conversation the spans belong to: the
// session, by its file (its path and its header, which says when it was
// created), so a resumed or recovered run goes on in the same one.
func (lr *liveRun) otelConversation(sessionPath string) {
	if lr.otel != nil {
		lr.otel.SetConversation(conversationID(sessionPath))
	}
}

// conversationID is the session's gen_ai.conversation.id: 32 hex digits
// of a hash of its absolute path and its header line; random for a
// session kept nowhere (/dev/null).
func conversationID(sessionPath string) string {
	var b [16]byte
	abs, err := filepath.Abs(sessionPath)
	f, ferr := os.Open(sessionPath)
	st, serr := os.Stat(sessionPath)
	if err != nil || ferr != nil || serr != nil || !st.Mode().IsRegular() {
		if f != nil {
			f.Close()
		}
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}
	defer f.Close()
	header, _, _ := bufio.NewReaderSize(f, 4096).ReadLine()
	sum := sha256.Sum256([]byte(abs + "\n" + string(header)))
	return hex.EncodeToString(sum[:16])
}

// stopOTel sends the spans ended so far and stops the exporter, waiting at
// most bound; a failure is told, never the run's: its exit code is its
// turn's.
func (lr *liveRun) stopOTel(bound time.Duration) {
	if lr.otel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := lr.otel.Shutdown(ctx); err != nil {
		lr.say("%v", err)
	}
}

// flushOTel is a hard exit's: the spans ended so far go out if they can
// within otelFlushBound; those still open are left to the run that
// recovers this one from its log.
func (lr *liveRun) flushOTel() {
	if lr.otel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), otelFlushBound)
	defer cancel()
	if err := lr.otel.Flush(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		lr.say("%v", err)
	}
}
