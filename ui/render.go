package ui

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"connectrpc.com/connect"
)

// page is what every page template gets.
type page struct {
	*session
	Title string
	Nav   string // the menu entry to mark
	Error string
	Data  any
	// Live is the page's event stream, if it has live parts (live.go).
	Live string
}

// fragmentHeader marks a request for a part of a page alone (static/dash.js
// polls them so when its event stream fails): an error answers in place.
const fragmentHeader = "Leasehold-Fragment"

var funcs = template.FuncMap{
	"dur":  fmtDur,
	"when": func(t time.Time) string { return fmtTime(t) },
}

// parse builds each page as the layout plus its own file; a page file may
// define the parts that its live page fetches or is pushed on their own.
func (d *Dashboard) parse() error {
	d.pages = map[string]*template.Template{}
	for _, name := range []string{"login", "error", "leases", "lease", "force", "elections", "idempotency", "queues", "queue", "groups", "group", "barriers", "cluster", "audit", "charts", "runbook"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/shared.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("ui: template %s: %w", name, err)
		}
		d.pages[name] = t
	}
	risk, err := forcedReleaseRisk()
	if err != nil {
		return err
	}
	d.risk = risk
	d.runbook, err = renderRunbook()
	return err
}

// render writes a whole page; it renders into a buffer first, so a
// template error is a clean 500, never half a page.
func (d *Dashboard) render(w http.ResponseWriter, status int, name string, p page) {
	d.exec(w, status, name, "layout", p)
}

// fragment writes one template of a page alone (a live part).
func (d *Dashboard) fragment(w http.ResponseWriter, name, tpl string, p page) {
	d.exec(w, http.StatusOK, name, tpl, p)
}

func (d *Dashboard) exec(w http.ResponseWriter, status int, name, tpl string, p page) {
	text, err := d.text(name, tpl, p)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write([]byte(text))
}

// text renders template tpl of page name into a string (whole, or an
// error for a person).
func (d *Dashboard) text(name, tpl string, p page) (string, error) {
	var b bytes.Buffer
	if err := d.pages[name].ExecuteTemplate(&b, tpl, p); err != nil {
		d.log.Error("dashboard template failed", "page", name, "template", tpl, "err", err)
		return "", errors.New("the dashboard could not render this page; see the node's log")
	}
	return b.String(), nil
}

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request, status int, csrf, msg string) {
	d.render(w, status, "login", page{session: &session{CSRF: csrf}, Title: "Log in", Error: msg})
}

// fail shows an error page (or, for a live part, an error line in its
// place) with the status the error deserves.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	p := page{session: s, Title: "Error", Error: msg}
	if r.Header.Get(fragmentHeader) == "true" {
		d.exec(w, status, "error", "message", p)
		return
	}
	d.render(w, status, "error", p)
}

// failAPI shows an API error with its code and message.
func (d *Dashboard) failAPI(w http.ResponseWriter, r *http.Request, s *session, err error) {
	status, msg := apiError(err)
	d.fail(w, r, s, status, msg)
}

// apiError is an API error as an HTTP status and a line for a person.
func apiError(err error) (int, string) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return http.StatusInternalServerError, err.Error()
	}
	msg := ce.Code().String() + ": " + ce.Message()
	switch ce.Code() {
	case connect.CodeInvalidArgument, connect.CodeOutOfRange:
		return http.StatusBadRequest, msg
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized, msg
	case connect.CodePermissionDenied:
		return http.StatusForbidden, msg
	case connect.CodeNotFound:
		return http.StatusNotFound, msg
	case connect.CodeAlreadyExists, connect.CodeAborted, connect.CodeFailedPrecondition:
		return http.StatusConflict, msg
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests, msg
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable, msg
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout, msg
	}
	return http.StatusInternalServerError, msg
}

// fmtDur rounds a duration for a person: 1m23s, 4.2s, 350ms.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}
