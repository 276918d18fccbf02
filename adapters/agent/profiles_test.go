package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/toolset"
	"github.com/escapement/escapement/kernel"
)

// TestProfilesRunTheirOwnModels: with profiles, the root runs its
// profile's system prompt and tools, a delegation names the child's
// profile, the child's requests go to that profile's model with its
// system prompt and tools, and a tool outside its profile is refused
// (the tool never runs).
func TestProfilesRunTheirOwnModels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]string{} // model: system prompt and tools of the first request it got
		ran := map[string]int{}
		record := func(model string, req ports.Request) {
			var names []string
			for _, s := range req.Tools {
				names = append(names, s.Name)
			}
			mu.Lock()
			defer mu.Unlock()
			if _, ok := seen[model]; !ok {
				seen[model] = req.Messages[0].Content + " " + fmt.Sprint(names)
			}
		}
		lead := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			record("lead", req)
			if last := req.Messages[len(req.Messages)-1]; last.Role == kernel.RoleTool {
				sink.Text("reviewed: " + last.Content)
				return nil
			}
			sink.Call(kernel.CallDelta{Index: 0, ID: "d1", Name: "delegate", Args: `{"task":"review a.go","profile":"reviewer"}`})
			return nil
		})
		small := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			record("small", req)
			if last := req.Messages[len(req.Messages)-1]; last.Role == kernel.RoleTool {
				sink.Text("verdict: " + last.Content)
				return nil
			}
			sink.Call(kernel.CallDelta{Index: 0, ID: "w1", Name: "write", Args: `{}`})
			return nil
		})
		tools, _ := toolset.New()
		for _, name := range []string{"read", "write"} {
			if err := tools.AddFunc(ports.ToolSpec{Name: name, Description: name}, func(context.Context, json.RawMessage) (string, error) {
				mu.Lock()
				ran[name]++
				mu.Unlock()
				return "done", nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		a := newAgent(t, Config{Model: lead, Tools: tools, RootProfile: "lead", Profiles: []Profile{
			{Profile: kernel.Profile{Name: "lead", System: "You lead.", AllTools: true, Delegates: []string{"reviewer"}}},
			{Profile: kernel.Profile{Name: "reviewer", Description: "reviews code", System: "You review.", Tools: []string{"read"}}, Model: small},
		}})
		res, err := a.Run(t.Context(), "review it").Result()
		if err != nil || !res.Completed() {
			t.Fatalf("result %+v, %v", res, err)
		}
		if got, want := seen["lead"], "You lead. [read write delegate]"; got != want {
			t.Errorf("the root's first request: %q, want %q", got, want)
		}
		if got, want := seen["small"], "You review. [read]"; got != want {
			t.Errorf("the reviewer's first request: %q, want %q", got, want)
		}
		if ran["write"] != 0 || !strings.Contains(res.Answer, `not_in_profile`) {
			t.Errorf("write ran %d times, answer %q: want it refused not_in_profile, never run", ran["write"], res.Answer)
		}
	})
}
