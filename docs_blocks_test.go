package leasehold_test

import (
	"fmt"
	"regexp"
	"strings"
)

// A shell example of the docs: a fenced block of one of shellLangs.
type example struct {
	file   string
	line   int    // of the opening fence
	script string // what bash runs
	skip   string // the reason of its not-run mark; "" runs it
}

var shellLangs = map[string]bool{"sh": true, "bash": true, "console": true, "shell": true}

var (
	fenceRE  = regexp.MustCompile("^```([a-z]*)\\s*$")
	notRunRE = regexp.MustCompile(`^<!-- not-run(?::(.*))? -->$`)
)

// examples extracts the shell blocks of a markdown file in order. A block
// whose preceding line is `<!-- not-run: reason -->` is kept, with the
// reason, to be reported as skipped; a mark without a reason, or one not
// followed by a shell block, is an error.
func examples(file, text string) ([]example, error) {
	var out []example
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if m := notRunRE.FindStringSubmatch(lines[i]); m != nil {
			if strings.TrimSpace(m[1]) == "" {
				return nil, fmt.Errorf("%s:%d: a not-run mark needs a reason: <!-- not-run: why -->", file, i+1)
			}
			if i+1 >= len(lines) || !isShellFence(lines[i+1]) {
				return nil, fmt.Errorf("%s:%d: a not-run mark must be the line just before a shell block's fence", file, i+1)
			}
		}
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		start := i
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: the block is never closed", file, start+1)
		}
		if !shellLangs[m[1]] {
			continue
		}
		ex := example{file: file, line: start + 1, script: commands(lines[start+1 : i])}
		if start > 0 {
			if mark := notRunRE.FindStringSubmatch(lines[start-1]); mark != nil {
				ex.skip = strings.TrimSpace(mark[1])
			}
		}
		out = append(out, ex)
	}
	return out, nil
}

func isShellFence(line string) bool {
	m := fenceRE.FindStringSubmatch(line)
	return m != nil && shellLangs[m[1]]
}

// commands is the script of a block. In a block written as a session
// (some line starts with "$ "), only the "$ " lines and their "\"
// continuations are commands and the rest is output; otherwise every line
// is, and output is shown in "# " comments, which bash skips.
func commands(block []string) string {
	session := false
	for _, l := range block {
		if strings.HasPrefix(l, "$ ") {
			session = true
		}
	}
	if !session {
		return strings.Join(block, "\n") + "\n"
	}
	var b strings.Builder
	continued := false
	for _, l := range block {
		if cmd, ok := strings.CutPrefix(l, "$ "); ok || continued {
			if ok {
				l = cmd
			}
			b.WriteString(l + "\n")
			continued = strings.HasSuffix(l, "\\")
		}
	}
	return b.String()
}
