package live

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// BenchmarkDelegatingChatMemory runs a chat of 300 turns through the
// driver, each turn delegating to a child that answers 4 KiB or 64 KiB in
// 1 KiB chunks, and reports the live heap it grew by (MB/300turns): what
// the tree keeps of the turns past
// (docs/semantics.md, "Finished agents"). The root's own history (the
// child's answer again, as its result) and the lifecycle ring are in it
// too.
func BenchmarkDelegatingChatMemory(b *testing.B) {
	for _, kib := range []int{4, 64} {
		b.Run(fmt.Sprintf("answer=%dKiB", kib), func(b *testing.B) { delegatingChat(b, kib) })
	}
}

func delegatingChat(b *testing.B, kib int) {
	token := strings.Repeat("x", 1023) + " "
	model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
		switch last := req.Messages[len(req.Messages)-1]; {
		case req.Agent != kernel.Root:
			for range kib {
				sink.Text(token)
			}
		case last.Role == kernel.RoleUser:
			sink.Call(kernel.CallDelta{Index: 0, ID: "c", Name: "delegate", Args: `{"task":"do it","name":"helper"}`})
		default:
			sink.Text("done")
		}
		return nil
	})
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var grew float64
	for b.Loop() {
		d, err := New(Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: model, Tools: ports.ToolsFunc(func(context.Context, ports.Call) ports.ToolResult { return ports.ToolResult{} })})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- d.Run(ctx) }()
		var base uint64
		for turn := 1; turn <= 300; turn++ {
			if err := d.Submit(ctx, fmt.Sprintf("turn %d", turn)); err != nil {
				b.Fatal(err)
			}
			for idle := false; !idle; runtime.Gosched() {
				if err := d.Inspect(ctx, func(k *kernel.Kernel) { idle = k.Quiescent() }); err != nil {
					b.Fatal(err)
				}
			}
			if turn == 1 {
				base = heap()
			}
		}
		grew = float64(heap()-base) / 1e6
		cancel()
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(grew, "MB/300turns")
}
