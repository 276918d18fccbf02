package openai

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/kernel"
	oa "github.com/sashabaranov/go-openai"
)

// attempt sends the request once and forwards the stream. started reports
// whether anything reached the sink (after which retrying is unsafe).
//
// How the stream's end is judged: a finish_reason ends the answer (what
// follows, the usage chunk and [DONE], gets TailWait at most); without one,
// `data: [DONE]` after text or tool calls is a normal end too (some servers
// and proxies never send a finish_reason); [DONE] with nothing before it is
// an empty answer, refused as a bad response; a body that ends without
// [DONE] or a finish_reason was cut off (a disconnect, or a stream error
// once tokens arrived).
func (m *Model) attempt(ctx context.Context, creq oa.ChatCompletionRequest, sink live.Sink) (started bool, err error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	capt := &capture{}
	st, err := m.client.CreateChatCompletionStream(context.WithValue(actx, captureKey{}, capt), creq)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, openError(err, capt, m.cfg.Now())
	}
	// Close on every path: on a cancel this is what tears the connection
	// down (the context already aborted the read).
	defer st.Close()

	var (
		finished bool
		tail     *time.Timer
		calls    callIndexer
	)
	defer func() {
		if tail != nil {
			tail.Stop()
		}
	}()
	for {
		chunk, err := st.Recv()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return started, ctx.Err()
			case finished:
				// The answer is whole: [DONE], the tail wait ran out, or the
				// connection dropped after the finish reason.
				return started, nil
			case errors.Is(err, io.EOF) && capt.done && started:
				return started, nil
			case errors.Is(err, io.EOF) && capt.done:
				return started, &attemptError{failure: kernel.FailureBadResponse,
					detail: "empty answer: the stream said [DONE] before any text, tool call or finish_reason"}
			}
			return started, recvError(err, capt)
		}
		if chunk.Usage != nil {
			sink.Usage(kernel.Usage{PromptTokens: chunk.Usage.PromptTokens, CompletionTokens: chunk.Usage.CompletionTokens})
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // we ask for one choice; ignore any others
			}
			d := ch.Delta
			if d.Content != "" {
				sink.Text(d.Content)
				started = true
			}
			if d.Refusal != "" {
				sink.Text(d.Refusal)
				started = true
			}
			for _, tc := range d.ToolCalls {
				sink.Call(kernel.CallDelta{Index: calls.index(tc), ID: tc.ID, Name: tc.Function.Name, Args: tc.Function.Arguments})
				started = true
			}
			if fc := d.FunctionCall; fc != nil && len(d.ToolCalls) == 0 {
				// The legacy function_call shape: one call, no id.
				sink.Call(kernel.CallDelta{Index: 0, Name: fc.Name, Args: fc.Arguments})
				started = true
			}
			if ch.FinishReason != "" && !finished {
				// Decide by what arrived, not by the reason (servers send
				// "stop" with tool calls); what remains is the usage chunk
				// and [DONE], which get TailWait at most.
				finished = true
				tail = time.AfterFunc(m.cfg.TailWait, cancel)
			}
		}
	}
}

// callIndexer maps streamed tool-call fragments to call indices. OpenAI
// sends an index on every fragment; older Ollama sent whole calls without
// one, so a fragment without an index that names a call (id or name) starts
// a new call at the lowest index not used yet, and one that does not
// continues the last. (An absurd index is passed through for the kernel to
// refuse; it does not push later calls out of range.)
type callIndexer struct {
	used map[int]bool
	last int
}

func (c *callIndexer) index(tc oa.ToolCall) int {
	var i int
	switch {
	case tc.Index != nil:
		i = *tc.Index
	case tc.ID != "" || tc.Function.Name != "":
		for c.used[i] {
			i++
		}
	default:
		i = c.last
	}
	if c.used == nil {
		c.used = make(map[int]bool)
	}
	c.used[i] = true
	c.last = i
	return i
}
