package leasehold_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	runbookLink = regexp.MustCompile(`runbook\.md#([A-Za-z0-9_-]+)`)
	mdHeading   = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	notInAnchor = regexp.MustCompile(`[^a-z0-9 _-]`)
)

// anchorOf is GitHub's anchor for a heading: lower case, punctuation
// dropped, spaces turned into hyphens.
func anchorOf(heading string) string {
	return strings.ReplaceAll(notInAnchor.ReplaceAllString(strings.ToLower(heading), ""), " ", "-")
}

// The anchors every runbook section keeps: the dashboard, the CLI and the
// suggested alerts of docs/operations.md point to them, and other branches' links may too.
var runbookSections = []string{"contention", "orphaned-locks", "force-release",
	"degraded-mode", "stuck-queue-key", "group-rebalancing", "lost-quorum"}

// Every docs/runbook.md#anchor in the README and docs/, the CLI's source
// and the dashboard's templates names a real heading of the runbook; the
// suggested alerts (docs/operations.md) and force-release's output point
// into it.
func TestRunbookLinksResolve(t *testing.T) {
	doc, err := os.ReadFile("docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(string(doc), -1) {
		anchors[anchorOf(m[1])] = true
	}
	for _, a := range runbookSections {
		if !anchors[a] {
			t.Errorf("docs/runbook.md has no section with the anchor %q", a)
		}
	}

	// Where links to the runbook live; ui/ is the dashboard's (it may be
	// absent on a branch without it).
	linked := map[string]int{}
	check := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range runbookLink.FindAllStringSubmatch(string(b), -1) {
			linked[filepath.Dir(path)]++
			if !anchors[m[1]] {
				t.Errorf("%s links runbook.md#%s: the runbook has no such section", path, m[1])
			}
		}
	}
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{"README.md"}, docs...) {
		check(f)
	}
	for _, dir := range []string{"cmd/leasehold", "ui"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".html") || strings.HasSuffix(path, ".txt")) {
				check(path)
			}
			return nil
		})
		if err != nil && !(dir == "ui" && os.IsNotExist(err)) {
			t.Fatal(err)
		}
	}
	if linked["docs"] == 0 {
		t.Error("docs/ links no runbook section: the suggested alerts should")
	}
	if linked["cmd/leasehold"] == 0 {
		t.Error("the CLI (cmd/leasehold) links no runbook section: force-release should")
	}

	// Each suggested alert carries a runbook link in the comment above it.
	ops, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, alerts, ok := strings.Cut(string(ops), "### Suggested alerts\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "Suggested alerts" section`)
	}
	alerts, _, _ = strings.Cut(alerts, "\n```\n")
	// The runbook's sections by anchor, to check each alert is named in
	// the section it points to.
	sections := map[string]string{}
	for _, part := range strings.Split(string(doc), "\n## ")[1:] {
		heading, body, _ := strings.Cut(part, "\n")
		sections[anchorOf(heading)] = body
	}
	// A comment block covers the alerts below it, up to the next block.
	linkedTo, inComment := "", false
	for _, line := range strings.Split(alerts, "\n") {
		comment := strings.HasPrefix(strings.TrimSpace(line), "#")
		if comment && !inComment {
			linkedTo = ""
		}
		inComment = comment
		name, isAlert := strings.CutPrefix(strings.TrimSpace(line), "- alert: ")
		switch m := runbookLink.FindStringSubmatch(line); {
		case comment && m != nil:
			linkedTo = m[1]
		case isAlert && linkedTo == "":
			t.Errorf("suggested alert %s has no runbook link in the comments above it or its group's", name)
		case isAlert && !strings.Contains(sections[linkedTo], name):
			t.Errorf("suggested alert %s links docs/runbook.md#%s, which does not name it", name, linkedTo)
		}
	}
}
