package main

import (
	"context"
	"sync/atomic"
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
