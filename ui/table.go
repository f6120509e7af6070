package ui

import "net/http"

// A table is a page whose live part is its table's rows (the template
// "rows" of the page's file): served whole, as its rows alone (which the
// page polls when its event stream fails), and as the rows its stream
// pushes. Its name is its template's, its menu entry's and its live view's.
type table struct {
	name, title string
	load        func(d *Dashboard, r *http.Request, s *session) (any, error)
}

var (
	leasesTable    = table{"leases", "Leases", func(d *Dashboard, r *http.Request, s *session) (any, error) { return d.leases(r, s) }}
	electionsTable = table{"elections", "Elections", func(d *Dashboard, r *http.Request, s *session) (any, error) {
		return d.elections(r, s)
	}}
	clusterTable = table{"cluster", "Cluster", func(d *Dashboard, r *http.Request, s *session) (any, error) { return d.nodes(r, s) }}
)

func (d *Dashboard) tablePage(t table) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		data, err := t.load(d, r, s)
		if err != nil {
			d.failAPI(w, r, s, err)
			return
		}
		d.render(w, http.StatusOK, t.name, page{session: s, Title: t.title, Nav: t.name, Data: data, Live: liveURL(t.name, r.URL.Query())})
	}
}

func (d *Dashboard) tableRows(t table) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		data, err := t.load(d, r, s)
		if err != nil {
			d.failAPI(w, r, s, err)
			return
		}
		d.fragment(w, t.name, "rows", page{session: s, Data: data})
	}
}

// live is the rows as the event stream's part.
func (t table) live(d *Dashboard, r *http.Request, s *session) (map[string]string, error) {
	data, err := t.load(d, r, s)
	if err != nil {
		return nil, err
	}
	return d.part(t.name, "rows", s, data)
}
