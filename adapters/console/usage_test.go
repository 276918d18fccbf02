package console

import (
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/kernel"
)

// TestUsageText: /usage sums the file's turns and this run's, names this
// run's part when there is an earlier one, and never calls unreported
// usage 0: all unreported is unknown, some is a lower bound.
func TestUsageText(t *testing.T) {
	for _, c := range []struct {
		prior kernel.Usage
		run   protocol.Usage
		want  []string
	}{
		{want: []string{"usage of this session: no requests yet"}},
		{run: protocol.Usage{PromptTokens: 100, CompletionTokens: 7, CachedTokens: 64, ReasoningTokens: 2, Requests: 1},
			want: []string{"usage of this session: 1 request: 100 input tokens (64 cached), 7 output tokens (2 reasoning)"}},
		{prior: kernel.Usage{PromptTokens: 50, CompletionTokens: 5, Requests: 2, Unreported: 1}, run: protocol.Usage{PromptTokens: 10, CompletionTokens: 1, Requests: 1},
			want: []string{"3 requests: 60 input tokens (0 cached), 6 output tokens (0 reasoning); 1 request reported no usage, so these counts are a lower bound",
				"of which this run: 1 request: 10 input tokens"}},
		{run: protocol.Usage{Requests: 2, Unreported: 2}, want: []string{"2 requests; unknown: the server reported no usage"}},
	} {
		got := UsageText(c.prior, c.run)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("UsageText(%+v, %+v) = %q, want %q in it", c.prior, c.run, got, w)
			}
		}
	}
}
