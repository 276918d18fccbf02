package mcp

import (
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStderrLastLineWithoutNewline: a server's last stderr line (often the
// crash message) is kept when it ends without a newline, whatever its
// length — also a multiple of the reader's buffer, which arrives only as
// fragments before the end of the pipe.
func TestStderrLastLineWithoutNewline(t *testing.T) {
	for _, n := range []int{10, 4095, 4096, 5000, 8192} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []string
		st := newStderrTail(r, func(s string) { mu.Lock(); got = append(got, s); mu.Unlock() })
		go st.read() // owned: finish waits for it
		_, _ = w.WriteString("first\n" + strings.Repeat("x", n))
		_ = w.Close()
		st.finish(time.Minute) // a hang guard: the pipe ends at once
		mu.Lock()
		if len(got) != 2 || len(got[1]) != n {
			t.Errorf("a last line of %d bytes without its newline: %d line(s) read", n, len(got))
		}
		mu.Unlock()
	}
}

// TestLongDescriptionCut: a tool's description goes out with every model
// request, so a long one is cut — saying so — and its tool still offered;
// a huge tool name is clipped where a note quotes it.
func TestLongDescriptionCut(t *testing.T) {
	long := strings.Repeat("n", 1<<20)
	list, notes := offers("s", []*sdk.Tool{
		{Name: "t", Description: strings.Repeat("d", 4<<20)},
		{Name: long, Description: "listed twice"},
		{Name: long, Description: "listed twice"},
	})
	if len(list) != 2 {
		t.Fatalf("%d tools offered", len(list))
	}
	if d := list[0].spec.Description; len(d) > MaxDescriptionBytes+100 || !strings.Contains(d, "[description cut: 4194304 bytes]") {
		t.Errorf("description of %d bytes ending %q", len(d), d[max(0, len(d)-60):])
	}
	for _, n := range notes {
		if len(n) > 300 {
			t.Errorf("a note of %d bytes", len(n))
		}
	}
}

// TestClashingNamesIndependentOfOrder: which of two tools whose names
// sanitise alike keeps the plain name depends on the names alone, so a
// session resumed against a server that lists its tools in another order
// calls the same tools: the name that needed no change keeps it, else the
// one that sorts first.
func TestClashingNamesIndependentOfOrder(t *testing.T) {
	mapping := func(names ...string) map[string]string {
		var tools []*sdk.Tool
		for _, n := range names {
			tools = append(tools, &sdk.Tool{Name: n})
		}
		list, _ := offers("s", tools)
		m := map[string]string{}
		for _, o := range list {
			m[o.tool.Name] = o.name
		}
		return m
	}
	for _, pair := range [][2]string{{"get.file", "get_file"}, {"a.b", "a b"}} {
		one, other := mapping(pair[0], pair[1]), mapping(pair[1], pair[0])
		if len(one) != 2 || !maps.Equal(one, other) {
			t.Errorf("%q listed both ways: %v and %v", pair, one, other)
		}
	}
	if m := mapping("get.file", "get_file"); m["get_file"] != "mcp__s__get_file" {
		t.Errorf("the name that needed no change lost the plain name: %v", m)
	}
	if m := mapping("a.b", "a b"); m["a b"] != "mcp__s__a_b" {
		t.Errorf("the name that sorts first lost the plain name: %v", m)
	}
}
