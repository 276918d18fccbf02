package gen

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// drawSequence draws a fixed mix of picks and ranges, small and large
// (beyond the shared tables too), either through the shared generators or
// through fresh rapid generators built at each draw, as the generator did
// before it shared them.
func drawSequence(shared bool) *rapid.Generator[[]int] {
	return rapid.Custom(func(t *rapid.T) []int {
		var out []int
		for n := 1; n <= maxIndex+3; n++ {
			list := make([]int, n)
			for i := range list {
				list[i] = 100*n + i
			}
			if shared {
				out = append(out, pick(t, list, "pick"))
			} else {
				out = append(out, rapid.SampledFrom(list).Draw(t, "pick"))
			}
		}
		for _, r := range [][2]int{{0, 0}, {0, 1}, {1, 3}, {0, 9}, {1, 4}, {0, 15}, {2, 7}, {0, maxUpTo}, {1, maxUpTo + 1}, {1, 1 << 20}, {5, maxUpTo + 40}} {
			if shared {
				out = append(out, intRange(t, r[0], r[1], "range"))
			} else {
				out = append(out, rapid.IntRange(r[0], r[1]).Draw(t, "range"))
			}
		}
		var b bool
		if shared {
			b = drawBool(t, "bool")
		} else {
			b = rapid.Bool().Draw(t, "bool")
		}
		if b {
			out = append(out, 1)
		}
		return out
	})
}

// TestSharedDrawsMatchRapid: the shared generators draw exactly what fresh
// rapid generators draw from the same bitstream, value for value and bit
// for bit (a draw that used more or fewer bits would shift every draw after
// it), so sharing them changed no seed's world and no sweep digest.
func TestSharedDrawsMatchRapid(t *testing.T) {
	shared, fresh := drawSequence(true), drawSequence(false)
	for seed := range 2000 {
		a, b := shared.Example(seed), fresh.Example(seed)
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d: shared generators drew %v, fresh ones %v", seed, a, b)
		}
	}
}

// TestLabelsAsBefore: the shared labels are the names the draws had when
// each was built by concatenation (rapid prints them for a failing world).
func TestLabelsAsBefore(t *testing.T) {
	sl := labelsOfScript("b3", 3, 1)
	if sl.replies != "b3_replies" || sl.reply[2].endWithText != "b3_r2_end_with_text" || sl.reply[0].noTask != "b3_r0_no_task" {
		t.Fatalf("script labels %+v", sl)
	}
	el := labelsOfEpisode(20) // beyond the shared table: built on the spot
	if el.deepAt != "episode20_deep_at" || el.input[2].target != "episode20_2_target" {
		t.Fatalf("episode labels %+v", el)
	}
	if fl := sharedTables().faults[3]; fl.retryAfter != "fault_rate_limit_retry_after" {
		t.Fatalf("fault labels %+v", fl)
	}
}
