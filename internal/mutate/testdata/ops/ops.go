// Package ops holds one instance of each construct the mutator touches, and
// of each it must leave alone, one per line so the test can name them.
package ops

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

const limit = 3 + 1 // constants are not mutated

type counter struct {
	n    int
	seen []int
	ok   bool
}

func (c *counter) step(x int, name string) (int, error) {
	if x < limit {
		return 0, errors.New("small: " + name)
	}
	if x >= 10 && c.ok {
		return x + 1, nil
	}
	if x == 5 || !c.ok {
		c.n++
	}
	c.n -= 2
	c.seen = append(c.seen, x)
	c.ok = true
	label := name + "!"
	_ = label
	c.log(x)
	for i := 0; i < x; i++ {
		if i > 2 {
			break
		}
		if i == 1 {
			continue
		}
	}
	switch x {
	case 7:
		c.n = 0
		break
	}
	if x > 100 {
		panic(fmt.Sprintf("too big: %d", x-100))
	}
	slog.Info("stepped", "x", x+1)
	return 0, fmt.Errorf("at %d", x+1)
}

func (c *counter) log(int) {}

// String is a printer: not mutated.
func (c *counter) String() string {
	if c.n > 0 {
		return fmt.Sprint(c.n + 1)
	}
	return ""
}

// edge holds the constructs of the operators for the edge's kinds of bug.
func edge(f *os.File, s string, redact func(string) string, m map[string]int) (string, error) {
	defer f.Close()
	if err := f.Sync(); err != nil {
		return "", err
	}
	err := f.Truncate(0)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err != nil {
		f.Close()
		return "", err
	}
	_ = f.Close()
	switch len(s) {
	case 429, 503:
		s = redact(s)
	}
	if v, ok := m[s]; ok && v > 1 {
		s = s[1:len(s)]
	}
	i := strings.LastIndexByte(s, ')')
	return s[:i] + fmt.Sprintf(" [%d]", i), nil
}

func quiet(s string) bool { return s == "" || strings.TrimSpace(s) == "" }
