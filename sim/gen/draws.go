package gen

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/escapement/escapement/sim/scenario"
	"pgregory.net/rapid"
)

// A world takes a few hundred draws. Building a rapid generator allocates
// (rapid.IntRange(0, 9) is two objects, rapid.SampledFrom a third for its
// slice), and so does every label made by concatenation, so drawing with
// fresh generators and labels cost more than running the world did. The
// generators and labels below are built once per process and only read
// afterwards, so concurrent generators can share them.
//
// Each shared generator consumes exactly the bits the one it replaces did,
// so every seed still draws the same world and sweep digests keep their
// meaning:
//   - rapid.SampledFrom(list) draws an index below len(list); index(n) is
//     rapid.SampledFrom over 0..n-1, the same draw;
//   - rapid.IntRange(lo, hi) with 0 <= lo draws a coin and then lo plus a
//     number in 0..hi-lo; upTo(hi-lo) is rapid.IntRange(0, hi-lo), the same
//     draw shifted by lo.

// maxIndex and maxUpTo bound the shared tables; a draw beyond them builds
// its generator on the spot (same bits, only slower).
const (
	maxIndex = 32
	maxUpTo  = 300 // a fault's instant: 0..300 grid steps
)

// tables are the shared generators and labels.
type tables struct {
	index [maxIndex + 1]*rapid.Generator[int]
	upTo  [maxUpTo + 1]*rapid.Generator[int]
	bool  *rapid.Generator[bool]
	seed  *rapid.Generator[int]

	levels   [MaxDepth + 1]string          // scripts_l<level>
	scripts  [MaxDepth + 1][2]scriptLabels // by level and slot
	tools    [3]toolLabels
	faults   []faultLabels // by the index of scenario.FaultKinds()
	episodes [16]episodeLabels
}

var sharedTables = sync.OnceValue(func() *tables {
	tb := &tables{bool: rapid.Bool(), seed: rapid.IntRange(1, 1<<20)}
	for n := 1; n <= maxIndex; n++ {
		tb.index[n] = indexGen(n)
	}
	for n := range tb.upTo {
		tb.upTo[n] = rapid.IntRange(0, n)
	}
	for l := range tb.levels {
		tb.levels[l] = fmt.Sprintf("scripts_l%d", l)
		for slot := range tb.scripts[l] {
			tb.scripts[l][slot] = newScriptLabels(scriptName(l, slot))
		}
	}
	for i := range tb.tools {
		tb.tools[i] = newToolLabels(toolName(i))
	}
	for _, kind := range scenario.FaultKinds() {
		tb.faults = append(tb.faults, newFaultLabels(kind))
	}
	for e := range tb.episodes {
		tb.episodes[e] = newEpisodeLabels(e)
	}
	return tb
})

func indexGen(n int) *rapid.Generator[int] {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return rapid.SampledFrom(idx)
}

// pick draws one element of list, as rapid.SampledFrom(list) would.
func pick[E any](t *rapid.T, list []E, label string) E {
	n := len(list)
	if n <= maxIndex {
		return list[sharedTables().index[n].Draw(t, label)]
	}
	return list[indexGen(n).Draw(t, label)]
}

// intRange draws a number in lo..hi (0 <= lo <= hi), as
// rapid.IntRange(lo, hi) would.
func intRange(t *rapid.T, lo, hi int, label string) int {
	if hi-lo <= maxUpTo {
		return lo + sharedTables().upTo[hi-lo].Draw(t, label)
	}
	return rapid.IntRange(lo, hi).Draw(t, label)
}

func drawBool(t *rapid.T, label string) bool { return sharedTables().bool.Draw(t, label) }

// scriptName is the script of a level's slot: main, then a1, b1, a2, ...
func scriptName(level, slot int) string {
	if level == 0 {
		return scenario.RootScript
	}
	return string(rune('a'+slot)) + strconv.Itoa(level)
}

func toolName(i int) string { return "t" + strconv.Itoa(i) }

// scriptLabels name the draws of one script.
type scriptLabels struct {
	replies string
	reply   [4]replyLabels
}

type replyLabels struct {
	first, rate, words, word, children, child, noTask, tools, tool, endWithText string
}

func newScriptLabels(name string) scriptLabels {
	sl := scriptLabels{replies: name + "_replies"}
	for i := range sl.reply {
		key := fmt.Sprintf("%s_r%d", name, i)
		sl.reply[i] = replyLabels{
			first: key + "_first", rate: key + "_rate", words: key + "_words", word: key + "_word",
			children: key + "_children", child: key + "_child", noTask: key + "_no_task",
			tools: key + "_tools", tool: key + "_tool", endWithText: key + "_end_with_text",
		}
	}
	return sl
}

func labelsOfScript(name string, level, slot int) *scriptLabels {
	if level < len(sharedTables().scripts) && slot < 2 {
		return &sharedTables().scripts[level][slot]
	}
	sl := newScriptLabels(name)
	return &sl
}

type toolLabels struct{ duration, fails, onCancel string }

func newToolLabels(name string) toolLabels {
	return toolLabels{duration: name + "_duration", fails: name + "_fails", onCancel: name + "_on_cancel"}
}

type faultLabels struct {
	on, n, at, agent, after, attempts, retryAfter, delay, onTool, named, tool string
}

func newFaultLabels(kind scenario.FaultKind) faultLabels {
	key := "fault_" + string(kind)
	return faultLabels{
		on: key + "_on", n: key + "_n", at: key + "_at", agent: key + "_agent", after: key + "_after",
		attempts: key + "_attempts", retryAfter: key + "_retry_after", delay: key + "_delay",
		onTool: key + "_on_tool", named: key + "_named", tool: key + "_tool",
	}
}

type episodeLabels struct {
	deep, deepAt, anchored, anchor, after, phase, jitter, kind, shutdown, burst string
	input                                                                       [3]inputLabels
}

type inputLabels struct{ gap, same, kind, target, bound, turn string }

func newEpisodeLabels(e int) episodeLabels {
	key := "episode" + strconv.Itoa(e)
	el := episodeLabels{
		deep: key + "_deep", deepAt: key + "_deep_at", anchored: key + "_anchored", anchor: key + "_anchor",
		after: key + "_after", phase: key + "_phase", jitter: key + "_jitter", kind: key + "_kind",
		shutdown: key + "_shutdown", burst: key + "_burst",
	}
	for b := range el.input {
		bkey := key + "_" + strconv.Itoa(b)
		el.input[b] = inputLabels{gap: bkey + "_gap", same: bkey + "_same", kind: bkey + "_kind",
			target: bkey + "_target", bound: bkey + "_bound", turn: bkey + "_turn"}
	}
	return el
}

func labelsOfEpisode(e int) *episodeLabels {
	if e < len(sharedTables().episodes) {
		return &sharedTables().episodes[e]
	}
	el := newEpisodeLabels(e)
	return &el
}
