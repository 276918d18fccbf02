package main

import "github.com/spf13/cobra"

func newConfigCmd(a *app) *cobra.Command {
	show := &cobra.Command{Use: "show", Args: cobra.NoArgs,
		Short: "Print the effective configuration: each setting, its value and where it came from",
		Long: `Print the settings run and chat would use with the same flags, each with its source (flag, env,
project FILE:LINE, user FILE:LINE, default; docs/config.md), and the profiles; secrets redacted.`,
		RunE: func(*cobra.Command, []string) error { return a.cfg.Show(a.out, a.secrets) }}
	(&liveFlags{}).register(show, true)
	cmd := &cobra.Command{Use: "config", Short: "Inspect escapement's configuration (docs/config.md)", Args: cobra.NoArgs}
	cmd.AddCommand(show)
	return cmd
}
