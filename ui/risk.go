package ui

import (
	_ "embed"
	"html/template"
	"strings"
)

// riskText is the runbook's forced-release risk text (docs/runbook.md,
// section force-release; TestRunbookHoldsTheRiskText keeps them equal).
//
//go:embed forced_release_risk.txt
var riskText string

// forcedReleaseRisk renders the risk text: paragraphs, and lines starting
// with "- " as a list.
func forcedReleaseRisk() (template.HTML, error) {
	var b strings.Builder
	inList := false
	for _, line := range strings.Split(strings.TrimSpace(riskText), "\n") {
		item, isItem := strings.CutPrefix(line, "- ")
		switch {
		case isItem && !inList:
			b.WriteString("<ul>")
			inList = true
		case !isItem && inList:
			b.WriteString("</ul>")
			inList = false
		}
		switch {
		case isItem:
			b.WriteString("<li>" + template.HTMLEscapeString(item) + "</li>")
		case strings.TrimSpace(line) != "":
			b.WriteString("<p>" + template.HTMLEscapeString(line) + "</p>")
		}
	}
	if inList {
		b.WriteString("</ul>")
	}
	return template.HTML(b.String()), nil
}
