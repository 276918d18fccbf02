package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// cancelOnSignal is how the batch commands (sim sweep, sim explore) stop
// on SIGINT or SIGTERM: the first signal cancels the returned context and
// sets the returned flag, so the command prints what it has and exits 130.
// stop must be called before the command returns: it joins the signal
// reader and stops listening.
func (a *app) cancelOnSignal(ctx context.Context) (_ context.Context, interrupted *atomic.Bool, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs, stopSignals := a.signals()
	interrupted = new(atomic.Bool)
	done := make(chan struct{})
	go func() { // owned: joined by stop
		defer close(done)
		select {
		case <-sigs:
			interrupted.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, interrupted, func() {
		cancel()
		<-done
		stopSignals()
	}
}

// batchBar is the progress bar of a batch command on stderr, when stderr is
// a terminal (nil otherwise: every method is then a no-op). Its methods
// may be called from several goroutines.
type batchBar struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

// progressBar starts a bar of n units named unit, described as desc.
func (a *app) progressBar(n int, desc, unit string) *batchBar {
	fd, ok := a.err.(interface{ Fd() uintptr })
	if !ok || !term.IsTerminal(int(fd.Fd())) {
		return nil
	}
	return &batchBar{bar: progressbar.NewOptions(n, progressbar.OptionSetWriter(a.err), progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString(unit),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())}
}

// set shows done units, and desc when not empty.
func (b *batchBar) set(done int, desc string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if desc != "" {
		b.bar.Describe(desc)
	}
	_ = b.bar.Set(done)
}

func (b *batchBar) finish() {
	if b != nil {
		_ = b.bar.Finish()
	}
}

// goWorker runs a batch's worker (sim/pool): Pool.Run waits for it.
func goWorker(w func()) { go w() } // owned: pool.Run returns after every worker
