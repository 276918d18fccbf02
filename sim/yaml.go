package sim

import (
	"github.com/escapement/escapement/kernel"
	"go.yaml.in/yaml/v3"
)

// The canonical YAML form of a scenario: what a trace header embeds, what a
// generator writes for a failing world, and what Load reads back to the same
// value (TestYAMLRoundTrip). Maps are written with sorted keys.

type yScenario struct {
	Name   string              `yaml:"name"`
	About  string              `yaml:"about,omitempty"`
	Seed   uint64              `yaml:"seed"`
	Limits yLimits             `yaml:"limits"`
	Agents map[string][]yReply `yaml:"agents"`
	Tools  map[string]yTool    `yaml:"tools,omitempty"`
	Faults []yFault            `yaml:"faults,omitempty"`
	Inputs []yInput            `yaml:"inputs,omitempty"`
	Expect *yExpect            `yaml:"expect,omitempty"`
}

type yLimits struct {
	Grace             string `yaml:"grace"`
	FirstTokenTimeout string `yaml:"first_token_timeout"`
	StallTimeout      string `yaml:"stall_timeout"`
	ToolTimeout       string `yaml:"tool_timeout"`
	TurnTimeout       string `yaml:"turn_timeout"`
	MaxDepth          int    `yaml:"max_depth"`
	MaxChildren       int    `yaml:"max_children"`
	MaxRequests       int    `yaml:"max_requests"`
	Debounce          string `yaml:"debounce"`
}

type yReply struct {
	Text       string  `yaml:"text,omitempty"`
	FirstToken string  `yaml:"first_token,omitempty"`
	Rate       float64 `yaml:"rate,omitempty"`
	Calls      []yCall `yaml:"calls,omitempty"`
}

type yCall struct {
	Tool     string         `yaml:"tool,omitempty"`
	Args     map[string]any `yaml:"args,omitempty"`
	ArgsRaw  string         `yaml:"args_raw,omitempty"`
	Delegate string         `yaml:"delegate,omitempty"`
	Prompt   string         `yaml:"prompt,omitempty"`
}

type yTool struct {
	Duration string `yaml:"duration"`
	Result   string `yaml:"result,omitempty"`
	Error    string `yaml:"error,omitempty"`
	OnCancel string `yaml:"on_cancel,omitempty"`
}

type yFault struct {
	At         string `yaml:"at"`
	Agent      string `yaml:"agent"`
	Fault      string `yaml:"fault"`
	Tool       string `yaml:"tool,omitempty"`
	After      int    `yaml:"after,omitempty"`
	RetryAfter string `yaml:"retry_after,omitempty"`
	Attempts   int    `yaml:"attempts,omitempty"`
	Delay      string `yaml:"delay,omitempty"`
}

type yInput struct {
	At        string `yaml:"at"`
	Submit    string `yaml:"submit,omitempty"`
	Interject string `yaml:"interject,omitempty"`
	Cancel    string `yaml:"cancel,omitempty"`
	Turn      uint64 `yaml:"turn,omitempty"`
	Shutdown  bool   `yaml:"shutdown,omitempty"`
}

type yExpect struct {
	Outcomes    map[string]string   `yaml:"outcomes,omitempty"`
	LLMRequests map[string]int      `yaml:"llm_requests,omitempty"`
	QuiescentBy string              `yaml:"quiescent_by,omitempty"`
	History     map[string]yHistory `yaml:"history,omitempty"`
}

type yHistory struct {
	Marker   *bool    `yaml:"marker,omitempty"`
	Partial  *bool    `yaml:"partial,omitempty"`
	Contains []string `yaml:"contains,omitempty"`
	Absent   []string `yaml:"absent,omitempty"`
}

func durStr(d interface{ String() string }) string { return d.String() }

// YAML renders the scenario in the loader's format.
func (s *Scenario) YAML() []byte {
	y := yScenario{Name: s.Name, About: s.About, Seed: s.Seed, Limits: limitsYAML(s.Limits)}
	y.Agents = make(map[string][]yReply, len(s.Agents))
	for name, script := range s.Agents {
		replies := make([]yReply, 0, len(script))
		for _, r := range script {
			yr := yReply{Text: r.Text}
			if r.FirstToken != DefaultFirstToken {
				yr.FirstToken = durStr(r.FirstToken)
			}
			if r.Rate != DefaultRate {
				yr.Rate = r.Rate
			}
			for _, c := range r.Calls {
				yr.Calls = append(yr.Calls, yCall{Tool: c.Tool, Args: c.Args, ArgsRaw: c.ArgsRaw, Delegate: c.Delegate, Prompt: c.Prompt})
			}
			replies = append(replies, yr)
		}
		y.Agents[name] = replies
	}
	if len(s.Tools) > 0 {
		y.Tools = make(map[string]yTool, len(s.Tools))
		for name, t := range s.Tools {
			yt := yTool{Duration: durStr(t.Duration), Result: t.Result, Error: t.Error}
			switch t.OnCancel {
			case CancelIgnore:
				yt.OnCancel = "ignore"
			case CancelDelay:
				yt.OnCancel = "delay " + t.CancelDelay.String()
			}
			y.Tools[name] = yt
		}
	}
	for _, f := range s.Faults {
		yf := yFault{At: durStr(f.At), Agent: f.Agent, Fault: string(f.Fault), Tool: f.Tool, After: f.After, Attempts: f.Attempts}
		if f.RetryAfter != 0 {
			yf.RetryAfter = durStr(f.RetryAfter)
		}
		if f.Delay != 0 {
			yf.Delay = durStr(f.Delay)
		}
		y.Faults = append(y.Faults, yf)
	}
	for _, in := range s.Inputs {
		y.Inputs = append(y.Inputs, yInput{At: durStr(in.At), Submit: in.Submit, Interject: in.Interject, Cancel: in.Cancel, Turn: in.Turn, Shutdown: in.Shutdown})
	}
	e := s.Expect
	if len(e.Outcomes)+len(e.LLMRequests)+len(e.History) > 0 || e.QuiescentBy > 0 {
		ye := &yExpect{Outcomes: e.Outcomes, LLMRequests: e.LLMRequests}
		if e.QuiescentBy > 0 {
			ye.QuiescentBy = durStr(e.QuiescentBy)
		}
		if len(e.History) > 0 {
			ye.History = map[string]yHistory{}
			for k, h := range e.History {
				ye.History[k] = yHistory(h)
			}
		}
		y.Expect = ye
	}
	b, err := yaml.Marshal(y)
	if err != nil {
		panic("sim: marshal scenario: " + err.Error())
	}
	return b
}

func limitsYAML(l kernel.Limits) yLimits {
	return yLimits{
		Grace: durStr(l.Grace), FirstTokenTimeout: durStr(l.FirstTokenTimeout), StallTimeout: durStr(l.StallTimeout),
		ToolTimeout: durStr(l.ToolTimeout), TurnTimeout: durStr(l.TurnTimeout), MaxDepth: l.MaxDepth,
		MaxChildren: l.MaxChildren, MaxRequests: l.MaxRequests, Debounce: durStr(l.Debounce),
	}
}
