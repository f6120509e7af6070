package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix starts the environment variable of every serve flag.
const envPrefix = "LEASEHOLD_"

// envName is the variable for a flag: --max-conns is LEASEHOLD_MAX_CONNS.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// flagsFromEnv sets each of cmd's own flags that the command line did not
// give from its environment variable (envName), so every flag has one, a
// new flag included, by one rule. The command line wins. A value the flag
// refuses is a usage error naming the variable. A flag set this way counts
// as given (pflag's Changed), like one typed on the command line.
func flagsFromEnv(cmd *cobra.Command) error {
	var err error
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		name := envName(f.Name)
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if serr := cmd.Flags().Set(f.Name, v); serr != nil {
			err = usagef("environment variable %s=%q (for --%s): %v", name, v, f.Name, serr)
		}
	})
	return err
}
