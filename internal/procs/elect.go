package procs

import (
	"os"
	"strconv"
	"strings"
)

// BeatingTerm is the command the election tests give `leasehold elect`:
// it records its term in $TERMS (see Terms), then, ignoring SIGTERM, beats
// (Unix ns) into $BEATS.$CANDIDATE until it is killed.
const BeatingTerm = `echo "$CANDIDATE $LEASEHOLD_TOKEN $(date +%s%N) $$" >> "$TERMS"; trap "" TERM; ` +
	`while :; do date +%s%N >> "$BEATS.$CANDIDATE"; sleep 0.02; done`

// Term is one leader's command as it recorded itself.
type Term struct {
	Candidate string
	Token     uint64
	Start     int64 // Unix ns
	Pgid      int
}

// Terms reads the commands' start lines ("candidate token start pgid").
func Terms(path string) []Term {
	b, _ := os.ReadFile(path)
	var out []Term
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		tok, _ := strconv.ParseUint(f[1], 10, 64)
		start, _ := strconv.ParseInt(f[2], 10, 64)
		pgid, _ := strconv.Atoi(f[3])
		out = append(out, Term{f[0], tok, start, pgid})
	}
	return out
}
