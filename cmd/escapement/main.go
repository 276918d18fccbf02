// Command escapement is the headless CLI of the escapement agent kernel: it
// runs scenario suites in the deterministic simulator, prints the agent state
// machine, and (with an OpenAI-compatible endpoint) runs live agents.
//
// Exit codes: 0 ok, 1 a check failed, 2 usage or input error, 130 interrupted.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], streams{in: os.Stdin, out: os.Stdout, err: os.Stderr}))
}
