package ui

import (
	"bytes"
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

// The runbook the node renders is docs/runbook.md, word for word.
func TestEmbeddedRunbookIsTheDocs(t *testing.T) {
	b, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, runbookText) {
		t.Fatal("ui/runbook.md differs from docs/runbook.md: cp docs/runbook.md ui/runbook.md")
	}
}

// Every runbook section the pages link (/ui/runbook#SECTION) is a heading
// of the rendered runbook under that id, and every section of the
// runbook has one; the rendered runbook has no markup from the text.
func TestPagesLinkRunbookSectionsThatExist(t *testing.T) {
	html, err := renderRunbook()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`<h2 id="([^"]+)">`).FindAllStringSubmatch(string(html), -1) {
		ids[m[1]] = true
	}
	for _, line := range strings.Split(string(runbookText), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok && !ids[strings.ReplaceAll(strings.ToLower(h), " ", "-")] {
			t.Errorf("the runbook's section %q has no heading id like GitHub's anchor: %v", h, ids)
		}
	}
	if strings.Contains(string(html), "<!-- The dashboard") || strings.Contains(string(html), "<script") {
		t.Error("the rendered runbook carries raw HTML from the text")
	}
	ents, err := files.ReadDir("templates")
	if err != nil {
		t.Fatal(err)
	}
	linked := 0
	for _, e := range ents {
		page, _ := files.ReadFile("templates/" + e.Name())
		if strings.Contains(string(page), "docs/runbook.md#") {
			t.Errorf("templates/%s names a runbook section as text: link /ui/runbook#SECTION", e.Name())
		}
		for _, m := range regexp.MustCompile(`/ui/runbook#([a-z-]+)`).FindAllStringSubmatch(string(page), -1) {
			linked++
			if !ids[m[1]] {
				t.Errorf("templates/%s links /ui/runbook#%s, which has no such section", e.Name(), m[1])
			}
		}
	}
	if linked == 0 {
		t.Fatal("no page links into the runbook")
	}
}
