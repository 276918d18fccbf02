package main

import (
	"fmt"
	"strings"

	"github.com/escapement/escapement/fsm"
	"github.com/spf13/cobra"
)

func newFSMCmd(a *app) *cobra.Command {
	var format string
	names := make([]string, 0, 3)
	for _, f := range fsm.Formats() {
		names = append(names, string(f))
	}
	cmd := &cobra.Command{
		Use:   "fsm",
		Short: "Print the agent state machine",
		Long: `Print the agent state machine from the same table the kernel executes
(qmuntal/stateless is configured from it), as a Mermaid state diagram, a
Graphviz DOT graph, or a text table of every declared transition.`,
		Example: `  escapement fsm                      # Mermaid stateDiagram
  escapement fsm --format dot | dot -Tsvg > fsm.svg
  escapement fsm --format table`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := fsm.Render(fsm.Format(format))
			if err != nil {
				return usageErr("--format: %v", err)
			}
			_, err = fmt.Fprint(a.out, out)
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", "mermaid", "output format: "+strings.Join(names, ", "))
	_ = cmd.RegisterFlagCompletionFunc("format", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}
