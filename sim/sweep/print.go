package sweep

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/escapement/escapement/sim/oracle"
)

// Write prints the summary as `escapement sim sweep` does: one line of
// totals (jobs is the workers it ran on, 0 for a merge), how often each
// probe was reached, and each failure with the command that reproduces
// its shrunk world.
func (s *Summary) Write(w io.Writer, jobs int) {
	p := s.Plan
	secs := s.Wall.Seconds()
	if secs <= 0 {
		secs = 1e-9
	}
	unreached := s.Unreached()
	required := len(oracle.Probes()) - len(s.Skipped())
	fmt.Fprintf(w, "sweep: %d worlds (seeds %d..%d, depth %d%s%s%s) in %v: %.0f worlds/s, %d events (%.0f events/s), %d violation(s), probes %d/%d reached%s, digest %s\n",
		s.Worlds, p.From, p.From+p.Seeds-1, p.Depth, s.crashText(), s.shardText(), jobsText(jobs), s.Wall.Round(time.Millisecond),
		float64(s.Worlds)/secs, s.Events, float64(s.Events)/secs, len(s.Failures),
		required-len(unreached), required, s.skippedText(), s.Digest[:16])
	s.probeTable(w)
	for _, f := range s.Failures {
		fmt.Fprintf(w, "FAIL seed %d: %s @%s %s: %s\n", f.Seed, f.Invariant, f.At, f.Agent, f.Detail)
		if f.File != "" {
			flags := ""
			if f.Flags != "" {
				flags = " " + f.Flags
			}
			fmt.Fprintf(w, "     shrunk to %d agent(s), %d events: escapement sim %s%s\n", f.Agents, f.Events, f.File, flags)
		}
	}
}

// probeTable says how often each probe was reached.
func (s *Summary) probeTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROBE\tREACHED")
	for _, pr := range oracle.Probes() {
		mark := ""
		switch {
		case Skips(s.Plan, pr):
			mark = fmt.Sprintf("  skipped: needs --depth %d or more", pr.MinDepth())
		case s.Probes[string(pr)] == 0:
			mark = "  <- never reached"
		}
		fmt.Fprintf(tw, "%s\t%d%s\n", pr, s.Probes[string(pr)], mark)
	}
	_ = tw.Flush()
}

func (s *Summary) shardText() string {
	if s.Plan.Shards > 1 || len(s.ShardsMerged) > 1 {
		return fmt.Sprintf(", shards %v of %d", s.ShardsMerged, s.Plan.Shards)
	}
	return ""
}

func (s *Summary) skippedText() string {
	if skipped := s.Skipped(); len(skipped) > 0 {
		return fmt.Sprintf(" (%d skipped: they need deeper worlds than depth %d)", len(skipped), s.Plan.Depth)
	}
	return ""
}

func (s *Summary) crashText() string {
	if s.Plan.CrashEvery > 0 {
		return fmt.Sprintf(", each also crashed after every %d step(s): %d crashed runs", s.Plan.CrashEvery, s.Crashes)
	}
	return ""
}

func jobsText(jobs int) string {
	if jobs > 0 {
		return ", " + strconv.Itoa(jobs) + " jobs"
	}
	return ""
}
