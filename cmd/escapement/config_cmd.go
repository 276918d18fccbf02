package main

import "github.com/spf13/cobra"

func newConfigCmd(a *app) *cobra.Command {
	show := &cobra.Command{Use: "show", Args: cobra.NoArgs,
		Short: "Print the effective configuration: each setting, its value and where it came from",
		Long: `Print the configuration run and chat would use with the same flags: the files read, every
setting with its value and source (flag, env VARIABLE, project FILE:LINE, user FILE:LINE or
default), whether each API key is set (never the key), and the profiles; secrets redacted.
Precedence: flag > environment > project file > user file > default (docs/config.md).`,
		RunE: func(*cobra.Command, []string) error { return a.cfg.Show(a.out, a.secrets) }}
	(&liveFlags{}).register(show, true)
	cmd := &cobra.Command{Use: "config", Short: "Inspect escapement's configuration (docs/config.md)", Args: cobra.NoArgs}
	cmd.AddCommand(show)
	return cmd
}
