package openai

import (
	"bytes"
	"io"
	"net/http"
)

// capture records, for one attempt, what go-openai's errors and its stream
// reader drop: an error response's status, headers and body, and whether a
// stream said `data: [DONE]` (go-openai's Recv returns io.EOF both after
// [DONE] and when the connection just closes) or sent an error event (the
// stream's decoder, sseBody, keeps error events from go-openai and ends the
// stream there). capturingDoer fills it in the goroutine that calls Recv,
// the same one that reads it.
type capture struct {
	// An error response (status >= 400).
	status       int
	body         []byte
	retryAfter   string // Retry-After
	retryAfterMS string // retry-after-ms (OpenAI's finer-grained header)
	url          string // the URL asked, userinfo removed

	// A streaming response (status < 400).
	contentType string
	head        []byte // the body's first bytes, for a body that is not SSE
	sawData     bool   // an event with data arrived
	done        bool   // a `data: [DONE]` event arrived
	errEvent    []byte // the error event's payload (`{"error": …}`)
}

type captureKey struct{}

// maxErrorBody bounds how much of an error response is kept.
const maxErrorBody = 64 << 10

// capturingDoer wraps the HTTP client. It sends the body the adapter built
// (body.go) in place of go-openai's. For an error status it records the
// status, Retry-After, the URL asked and a bounded copy of the body in the
// attempt's capture (found through the request's context), closing the
// connection's body (go-openai reads error bodies but never closes them).
// For a stream it puts an event-stream decoder (sseBody) between the
// connection and go-openai's reader; a JSON body (a server that ignored
// stream:true) is first turned into the events it stands for (jsonBody).
type capturingDoer struct {
	c *http.Client
	// maxLine bounds one line of a stream (Config.MaxLineBytes).
	maxLine int
}

func (d *capturingDoer) Do(req *http.Request) (*http.Response, error) {
	swapBody(req)
	resp, err := d.c.Do(req)
	if err != nil {
		return resp, err
	}
	c, ok := req.Context().Value(captureKey{}).(*capture)
	if !ok {
		return resp, nil
	}
	if resp.StatusCode < 400 {
		c.contentType = resp.Header.Get("Content-Type")
		if isJSON(c.contentType) {
			resp.Body = d.jsonBody(resp.Body)
		}
		resp.Body = &sseBody{ReadCloser: resp.Body, c: c, maxLine: d.maxLine}
		return resp, nil
	}
	c.status = resp.StatusCode
	c.url = req.URL.Redacted()
	c.retryAfter = resp.Header.Get("Retry-After")
	c.retryAfterMS = resp.Header.Get("Retry-After-Ms")
	c.body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(c.body))
	return resp, nil
}
