package ui

import (
	"net/http"
	"slices"
	"strings"
)

// A viewer whose token is limited to prefixes sees and acts only there:
// the API refuses the rest, and the pages ask it only for what lies under
// the prefixes, so they list the viewer's own instead of failing.

// limited says the viewer's token is held to its prefixes.
func (v Viewer) limited() bool { return len(v.Prefixes) > 0 && !slices.Contains(v.Prefixes, "") }

// Limits names the viewer's prefixes for the header ("" for none).
func (v Viewer) Limits() string {
	if !v.limited() {
		return ""
	}
	return strings.Join(v.Prefixes, ", ")
}

// prefix is the prefix a list page asks for: the filter's, or with none
// given the viewer's first prefix (a list must lie under one of them).
func (s *session) prefix(r *http.Request) string {
	p := r.URL.Query().Get("prefix")
	if p == "" && s.limited() {
		return s.Prefixes[0]
	}
	return p
}

// Views are the menu entries this viewer may open: the charts count every
// tenant's calls, so a limited viewer has none.
func (s *session) Views() []view {
	if !s.limited() {
		return views
	}
	return slices.DeleteFunc(slices.Clone(views), func(v view) bool { return v.Nav == "charts" })
}

// nodeWide serves h, a page of the whole node's figures, only to a viewer
// not limited to prefixes.
func (d *Dashboard) nodeWide(h func(http.ResponseWriter, *http.Request, *session)) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		if s.limited() {
			d.fail(w, r, s, http.StatusForbidden, nodeWideText(s))
			return
		}
		h(w, r, s)
	}
}

// nodeWideText is why a limited viewer may not see the node's figures.
func nodeWideText(s *session) string {
	return "The charts count every tenant's calls; token " + s.Name + " is limited to " + s.Limits() + ". Use a token without prefixes."
}
