package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// buildVersion reads the module version and the VCS stamp (revision, time,
// modified) that go build and go install put into the binary.
func buildVersion() cliout.Version {
	v := cliout.Version{Module: "github.com/leasehold/leasehold", Version: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Module, v.Version, v.GoVersion = bi.Main.Path, bi.Main.Version, bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
				v.Time = cliout.Time(t)
			}
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// versionLine is the one-line form: --version and version's text.
func versionLine(v cliout.Version) string {
	s := "leasehold " + v.Version
	if v.Revision != "" {
		s += " (" + v.Revision
		if v.Time != "" {
			s += " " + v.Time
		}
		if v.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s + " " + v.GoVersion
}

func newVersion() *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and the commit this binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := buildVersion()
			return out.print(cmd.OutOrStdout(), v, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, versionLine(v))
				return err
			})
		},
	}
	out = addOutput(cmd)
	return cmd
}
