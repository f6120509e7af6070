package leasehold_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A shell example of the docs: a fenced block of one of shellLangs, with
// the marks on the lines just above its fence.
type example struct {
	file   string
	line   int    // of the opening fence
	script string // what bash runs
	skip   string // the reason of its not-run mark; "" runs it

	// runFor bounds what runs until interrupted (<!-- run-for: 2s -->):
	// each leasehold and curl command of the block is interrupted (SIGINT,
	// as Ctrl-C) after runFor; it must then end with 0 or by the signal.
	runFor time.Duration
	// setup is the shell of its setup marks (<!-- setup: commands -->), run
	// before the block in the same shell: the state a reader already has
	// (an incident's lease, a member's session) and the docs do not make.
	setup string
	// expect is the text of its expect marks (<!-- expect: text -->): the
	// block's output must contain each.
	expect []string
	// exit is the status of its exit mark (<!-- exit: 22 -->): the
	// block's first failing command must exit with it; 0 means none may fail.
	exit int
}

var shellLangs = map[string]bool{"sh": true, "bash": true, "console": true, "shell": true}

var (
	// A fence may be indented, as in a list item; the block's lines lose
	// the fence's indentation.
	fenceRE = regexp.MustCompile("^( *)```([a-z]*)\\s*$")
	markRE  = regexp.MustCompile(`^ *<!-- (not-run|run-for|setup|expect|exit)(?::(.*?))? -->$`)
)

// examples extracts the shell blocks of a markdown file in order. The marks
// on the lines just above a block's fence say how it runs:
//
//	<!-- not-run: reason -->  skipped, reported with the reason
//	<!-- run-for: 2s -->      its leasehold and curl commands are interrupted after 2s
//	<!-- setup: commands -->  run first, in the same shell, output not shown
//	<!-- expect: text -->     its output must contain text
//	<!-- exit: N -->          it must fail, its first failing command with status N
//
// A mark without its value, an unknown one, or one not followed by a
// shell block is an error.
func examples(file, text string) ([]example, error) {
	var out []example
	lines := strings.Split(text, "\n")
	var marks []int // the lines of the marks above the next line
	for i := 0; i < len(lines); i++ {
		if markRE.MatchString(lines[i]) || strings.HasPrefix(strings.TrimSpace(lines[i]), "<!-- not-run") {
			marks = append(marks, i)
			continue
		}
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			if len(marks) > 0 {
				return nil, fmt.Errorf("%s:%d: a mark must be just above a shell block's fence (or another mark)", file, marks[0]+1)
			}
			continue
		}
		start, indent := i, m[1]
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimLeft(lines[i], " "), "```"); i++ {
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: the block is never closed", file, start+1)
		}
		if m[2] == "" && looksLikeShell(lines[start+1:i]) {
			return nil, fmt.Errorf("%s:%d: a block of commands without a language: label it sh (and mark it not-run if it is not meant to run)", file, start+1)
		}
		if !shellLangs[m[2]] {
			if len(marks) > 0 {
				return nil, fmt.Errorf("%s:%d: a mark must be just above a shell block's fence", file, marks[0]+1)
			}
			continue
		}
		body := make([]string, 0, i-start-1)
		for _, l := range lines[start+1 : i] {
			body = append(body, strings.TrimPrefix(l, indent))
		}
		ex := example{file: file, line: start + 1, script: commands(body)}
		for _, at := range marks {
			if err := ex.mark(lines[at]); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, at+1, err)
			}
		}
		marks = nil
		out = append(out, ex)
	}
	if len(marks) > 0 {
		return nil, fmt.Errorf("%s:%d: a mark must be just above a shell block's fence", file, marks[0]+1)
	}
	return out, nil
}

// looksLikeShell says whether an unlabeled block is commands: a line of it
// runs leasehold or curl, or is a session's "$ " line.
func looksLikeShell(block []string) bool {
	for _, l := range block {
		l = strings.TrimSpace(l)
		for _, p := range []string{"leasehold ", "curl ", "$ "} {
			if strings.HasPrefix(l, p) {
				return true
			}
		}
	}
	return false
}

func (ex *example) mark(line string) error {
	m := markRE.FindStringSubmatch(line)
	if m == nil {
		return fmt.Errorf("a mark is <!-- not-run: why -->")
	}
	value := strings.TrimSpace(m[2])
	if value == "" {
		return fmt.Errorf("a %s mark needs a value: <!-- %s: ... -->", m[1], m[1])
	}
	switch m[1] {
	case "not-run":
		ex.skip = value
	case "run-for":
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 || d > 10*time.Second {
			return fmt.Errorf("a run-for mark needs a duration up to 10s: %q", value)
		}
		ex.runFor = d
	case "setup":
		ex.setup += value + "\n"
	case "expect":
		ex.expect = append(ex.expect, value)
	case "exit":
		n, err := strconv.Atoi(value)
		if err != nil || n <= 0 || n > 255 {
			return fmt.Errorf("an exit mark needs a status from 1 to 255: %q", value)
		}
		ex.exit = n
	}
	return nil
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
