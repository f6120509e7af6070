package procs

import (
	"os"
	"strings"
)

// ChildEnv is the environment of every child: the test's own, without any
// LEASEHOLD_ variable that could leak in from the caller's shell, and
// without the race runtime's default 1s sleep at exit (which would add a
// second to every CLI command); then extra.
func ChildEnv(extra ...string) []string {
	var env []string
	gorace := "atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "LEASEHOLD_"):
		case strings.HasPrefix(kv, "GORACE="):
			gorace = strings.TrimPrefix(kv, "GORACE=") + " " + gorace
		default:
			env = append(env, kv)
		}
	}
	return append(append(env, "GORACE="+gorace), extra...)
}
