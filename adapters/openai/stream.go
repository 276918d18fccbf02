package openai

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
	oa "github.com/sashabaranov/go-openai"
)

// progressEvery bounds how often reasoning output is reported as progress
// (ports.ProgressSink): often enough for any watchdog worth setting, rarely
// enough that 20,000 reasoning tokens are not 20,000 kernel events.
const progressEvery = 250 * time.Millisecond

// attempt sends the request once and forwards the stream. started reports
// whether answer text or a call reached the sink (after which retrying is
// unsafe: it would duplicate them); progress alone does not count.
//
// How the stream's end is judged: a finish_reason ends the answer (what
// follows, the usage chunk and [DONE], gets TailWait at most), except one
// that says the answer is not whole ("length", "content_filter", "error":
// finishFailure); without one, `data: [DONE]` after text or tool calls is a
// normal end too (some servers and proxies never send a finish_reason);
// [DONE] with no answer before it is an empty answer, refused as a bad
// response; a body that ends without [DONE] or a finish_reason was cut off
// (a disconnect, or a stream error once tokens arrived).
//
// Reasoning (reasoning_content, reasoning, reasoning_details, "thinking"
// parts) is no part of the answer: it is never forwarded as text. It is
// reported as progress, so the kernel's watchdogs see a live stream, and
// collected in thought (but "thinking" parts), which Stream hands the sink
// once the attempt succeeded (docs/live.md, "Reasoning"). Anything else
// that adds nothing — empty content, a tool-call fragment with no id, no
// name and no arguments — is not forwarded at all: a server that streams
// only that is silent to the watchdogs, which end the request
// (docs/semantics.md, "Deadlines").
func (m *Model) attempt(ctx context.Context, creq oa.ChatCompletionRequest, sink ports.Sink, thought *reasoning) (started bool, err error) {
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
		pinged   bool
		lastPing time.Time
	)
	defer func() {
		if tail != nil {
			tail.Stop()
		}
	}()
	// Progress appends nothing to the answer, so an attempt that only
	// reported progress may still be retried: started says answer text or
	// a call arrived.
	progress := func() {
		ps, ok := sink.(ports.ProgressSink)
		if !ok {
			return
		}
		if now := m.cfg.Now(); !pinged || now.Sub(lastPing) >= progressEvery {
			pinged, lastPing = true, now
			ps.Progress()
		}
	}
	text := func(s string) {
		if s != "" {
			sink.Text(s)
			started = true
		}
	}
	for {
		raw, err := st.RecvRaw()
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
				return started, &attemptError{failure: kernel.FailureBadResponse, final: true,
					detail: "empty answer: the stream said [DONE] before any text, tool call or finish_reason"}
			}
			return started, recvError(err, capt)
		}
		chunk, err := decodeChunk(raw)
		if err != nil {
			return started, &attemptError{failure: kernel.FailureBadResponse, detail: "unparseable chunk: " + err.Error()}
		}
		if u, ok := chunk.usage(); ok {
			sink.Usage(u)
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // we ask for one choice; ignore any others
			}
			d := ch.Delta
			content, thinking, ok := contentText(d.Content)
			if !ok {
				return started, &attemptError{failure: kernel.FailureBadResponse, detail: "unparseable chunk: content is neither a string nor a list of parts: " + string(d.Content)}
			}
			if thinking || present(d.ReasoningContent) || present(d.Reasoning) || present(d.ReasoningDetails) {
				progress()
			}
			thought.add(fieldReasoningContent, d.ReasoningContent)
			thought.add(fieldReasoning, d.Reasoning)
			thought.addDetails(d.ReasoningDetails)
			text(content)
			if refusal, _, _ := contentText(d.Refusal); refusal != "" {
				text(refusal)
			}
			for _, tc := range d.ToolCalls {
				args := argumentsText(tc.Function.Arguments)
				if tc.ID == "" && tc.Function.Name == "" && args == "" {
					// Adds nothing: not forwarded, so it is no progress
					// for the watchdogs and no step in the log
					// (docs/semantics.md, "Deadlines").
					continue
				}
				sink.Call(kernel.CallDelta{Index: calls.index(tc), ID: tc.ID, Name: tc.Function.Name, Args: args})
				started = true
			}
			if fc := d.FunctionCall; fc != nil && len(d.ToolCalls) == 0 {
				// The legacy function_call shape: one call, no id.
				if args := argumentsText(fc.Arguments); fc.Name != "" || args != "" {
					sink.Call(kernel.CallDelta{Index: 0, Name: fc.Name, Args: args})
					started = true
				}
			}
			if ch.FinishReason == nil || *ch.FinishReason == "" || finished {
				continue
			}
			if fe := finishFailure(*ch.FinishReason, ch, started); fe != nil {
				return started, fe
			}
			// Decide by what arrived, not by the reason (servers send
			// "stop" with tool calls); what remains is the usage chunk
			// and [DONE], which get TailWait at most.
			finished = true
			tail = time.AfterFunc(m.cfg.TailWait, cancel)
		}
	}
}

// failureCut is how an answer the server cut short fails: a stream error
// once text or calls arrived (the kernel keeps them as partial), a bad
// response before.
func failureCut(answered bool) kernel.Failure {
	if answered {
		return kernel.FailureStream
	}
	return kernel.FailureBadResponse
}

// callIndexer maps streamed tool-call fragments to call indices. OpenAI
// sends an index on every fragment; older Ollama and Gemini send calls
// without one (Gemini several in one chunk). A fragment without an index
// that repeats the id of a call seen before continues that call (vLLM-like
// servers repeat the id on every fragment); one that names a new call (a
// new id, or a name) starts it at the lowest index not used yet; one that
// names nothing continues the last. (An absurd index is passed through for
// the kernel to refuse; it does not push later calls out of range.)
type callIndexer struct {
	used map[int]bool
	ids  map[string]int
	last int
}

func (c *callIndexer) index(tc callFragment) int {
	if c.used == nil {
		c.used, c.ids = make(map[int]bool), make(map[string]int)
	}
	var i int
	prev, seen := c.ids[tc.ID]
	switch {
	case tc.Index != nil:
		i = *tc.Index
	case tc.ID != "" && seen:
		i = prev
	case tc.ID != "" || tc.Function.Name != "":
		for c.used[i] {
			i++
		}
	default:
		i = c.last
	}
	c.used[i] = true
	if tc.ID != "" && !seen {
		c.ids[tc.ID] = i
	}
	c.last = i
	return i
}
