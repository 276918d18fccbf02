package openai_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// TestContextLengthClassified: each server's way of refusing a request as
// longer than the model's window is the context_length failure, sent once
// and never retried (the kernel compacts and asks again,
// docs/semantics.md, "Compaction"); what only resembles it — a rate limit
// counting tokens, another client error, a server error — is not.
func TestContextLengthClassified(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   kernel.Failure
	}{
		{"OpenAI", 400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, kernel.FailureContextLength},
		{"OpenAI input window", 400, `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","code":null}}`, kernel.FailureContextLength},
		{"vLLM", 400, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`, kernel.FailureContextLength},
		{"vLLM decoder prompt", 400, `{"object":"error","message":"The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that max_model_len is no smaller than the number of text tokens.","type":"BadRequestError","code":400}`, kernel.FailureContextLength},
		{"vLLM max_tokens", 400, `{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).","type":"BadRequestError","param":null,"code":400}}`, kernel.FailureContextLength},
		{"llama.cpp", 400, `{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}`, kernel.FailureContextLength},
		{"Ollama", 400, `{"error":"the input length exceeds the context length"}`, kernel.FailureContextLength},
		{"Ollama prompt", 400, `{"error":"prompt too long; exceeded max context length by 912 tokens"}`, kernel.FailureContextLength},
		{"DeepSeek", 400, `{"error":{"message":"This model's maximum context length is 65536 tokens. However, you requested 70001 tokens (70001 in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`, kernel.FailureContextLength},
		{"OpenRouter", 400, `{"error":{"message":"This endpoint's maximum context length is 100000 tokens. However, you requested about 200000 tokens (199000 of text input, 1000 in the output). Please reduce the length of either one.","code":400}}`, kernel.FailureContextLength},
		{"Anthropic compat", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}`, kernel.FailureContextLength},
		{"Mistral", 400, `{"object":"error","message":"Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length","type":"invalid_request_message_order","code":"3051"}`, kernel.FailureContextLength},
		{"Together", 422, `{"error":{"message":"Input validation error: Input (123456 tokens) is longer than the model's context length (131072 tokens).","type":"invalid_request_error"}}`, kernel.FailureContextLength},
		{"xAI", 400, `{"code":"Client specified an invalid argument","error":"This model's maximum prompt length is 131072 but the request contains 537812 tokens."}`, kernel.FailureContextLength},
		{"LM Studio", 400, `{"error":"Trying to keep the first 9000 tokens when context the overflows. However, your prompt is greater than the context length, which is not enough."}`, kernel.FailureContextLength},
		{"Gemini", 400, `[{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]`, kernel.FailureContextLength},
		{"TGI", 422, `{"error":"Input validation error: ` + "`inputs`" + ` tokens + ` + "`max_new_tokens`" + ` must be <= 4096. Given: 5000 ` + "`inputs`" + ` tokens and 100 ` + "`max_new_tokens`" + `","error_type":"validation"}`, kernel.FailureContextLength},
		{"Bedrock via a gateway", 400, `{"message":"Input is too long for requested model."}`, kernel.FailureContextLength},
		{"413", 413, `{"error":{"message":"prompt is too long"}}`, kernel.FailureContextLength},
		// Not a context-length refusal.
		{"rate limit counting tokens", 429, `{"error":{"message":"Rate limit reached for tokens per min (TPM): Limit 30000, Used 29000. Please try again.","code":"rate_limit_exceeded"}}`, kernel.FailureRateLimit},
		{"throttled tokens", 400, `{"message":"ThrottlingException: Too many tokens, please wait before trying again."}`, kernel.FailureBadResponse},
		{"other 400", 400, `{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error","code":"invalid_value"}}`, kernel.FailureBadResponse},
		{"500 speaking of context", 500, `{"error":{"message":"maximum context length is 4096 tokens","type":"server_error"}}`, kernel.FailureServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				w.Status(tc.status, tc.body)
			})
			defer srv.Close()
			err := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = 1 }).Stream(context.Background(), request(), newSink())
			if failure(err) != tc.want {
				t.Errorf("%v: %s, want %s", err, failure(err), tc.want)
			}
			wantRequests := 1
			if tc.status >= 500 || tc.status == http.StatusTooManyRequests {
				wantRequests = 2
			}
			if n := len(srv.Requests()); n != wantRequests {
				t.Errorf("%d requests, want %d", n, wantRequests)
			}
		})
	}
}
