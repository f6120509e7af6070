package ui

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The risk text the forced-release page shows is the runbook's own.
func TestRunbookHoldsTheRiskText(t *testing.T) {
	b, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Force release\n")
	if !ok {
		t.Fatal("docs/runbook.md has no '## Force release' section (anchor force-release)")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	if !strings.Contains(section, strings.TrimSpace(riskText)) {
		t.Fatal("docs/runbook.md's force-release section does not hold ui/forced_release_risk.txt word for word; keep them the same")
	}
}

// Every runbook section the pages point to exists, under the anchor they
// name.
func TestPagesLinkRunbookSectionsThatExist(t *testing.T) {
	b, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			anchors[strings.ReplaceAll(strings.ToLower(h), " ", "-")] = true
		}
	}
	ents, err := files.ReadDir("templates")
	if err != nil {
		t.Fatal(err)
	}
	linked := 0
	for _, e := range ents {
		page, _ := files.ReadFile("templates/" + e.Name())
		for _, m := range regexp.MustCompile(`docs/runbook\.md#([a-z-]+)`).FindAllStringSubmatch(string(page), -1) {
			linked++
			if !anchors[m[1]] {
				t.Errorf("templates/%s points to docs/runbook.md#%s, which has no such section", e.Name(), m[1])
			}
		}
	}
	if linked == 0 {
		t.Fatal("no page points into the runbook")
	}
}
