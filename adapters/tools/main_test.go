package tools

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// roleEnv, when set, makes the test binary play escapement itself for a
// test that must kill or inspect "escapement" from outside (roles below).
const roleEnv = "TOOLS_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(playRole(role))
	}
	goleak.VerifyTestMain(m)
}

// playRole "shell" runs one shell call, the command TOOLS_TEST_COMMAND in
// the workspace TOOLS_TEST_DIR, and prints its result (unless the test
// kills this process first).
func playRole(role string) int {
	b, err := New(Config{Workspace: os.Getenv("TOOLS_TEST_DIR"), AllowShell: true, OutputLimit: 64 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer b.Close()
	if role != "shell" {
		fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
		return 2
	}
	r := b.Run(context.Background(), call("shell", map[string]string{"command": os.Getenv("TOOLS_TEST_COMMAND")}))
	fmt.Print(r.Content)
	return 0
}
