package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionString describes the binary from its build information: the
// module version ("(devel)" for a build from a checkout), the VCS commit
// and time, whether the tree was modified, and the Go version.
func versionString() string {
	version, commit, when, dirty := "(unknown)", "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	out := "wsmux " + version
	if commit != "" {
		out += " commit " + commit
		if dirty {
			out += " (modified)"
		}
	}
	if when != "" {
		out += " built from a tree of " + when
	}
	return out + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Long: `Print the module version, the commit it was built from (when built from a git
checkout) and the Go version, from the binary's build information. Same as
'wsmux --version'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		},
	}
}
