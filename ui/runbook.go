package ui

import (
	"bytes"
	_ "embed"
	"html/template"
	"net/http"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
)

// runbookText is docs/runbook.md (TestEmbeddedRunbookIsTheDocs keeps the
// copy equal): the pages link its sections at /ui/runbook#SECTION.
//
//go:embed runbook.md
var runbookText []byte

// renderRunbook renders the runbook with goldmark: GitHub's heading
// anchors (so docs/runbook.md#force-release is /ui/runbook#force-release
// here too) and tables; raw HTML is left out and dangerous link schemes
// dropped (goldmark's default without html.WithUnsafe), so the page holds
// only markup goldmark made and text it escaped.
func renderRunbook() (template.HTML, error) {
	md := goldmark.New(goldmark.WithExtensions(extension.Table), goldmark.WithParserOptions(parser.WithAutoHeadingID()))
	_, body, _ := bytes.Cut(runbookText, []byte("\n")) // its title: the page has one
	var b bytes.Buffer
	if err := md.Convert(body, &b); err != nil {
		return "", err
	}
	return template.HTML(b.String()), nil
}

func (d *Dashboard) runbookPage(w http.ResponseWriter, r *http.Request, s *session) {
	d.render(w, http.StatusOK, "runbook", page{session: s, Title: "Runbook", Data: d.runbook})
}
