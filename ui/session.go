package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// Cookies. The bearer token lives in an HttpOnly, SameSite=Strict cookie
// (Secure under TLS), so no script can read it and no other site send it
// (a page on another port of this host is the same site: see
// sameOrigin). The CSRF cookie is the double-submit token every form
// carries back.
const (
	tokenCookie = "leasehold_token"
	csrfCookie  = "leasehold_csrf"
	maxForm     = 16 << 10
)

// session is one request's viewer: who, with which token, and the form
// token its forms must return.
type session struct {
	Viewer
	token string
	CSRF  string
	// header: the token came in an Authorization header (curl, scripts),
	// which no browser sends on its own, so no CSRF check is needed.
	header bool
}

// authed wraps m for the API with the viewer's token.
func authed[T any](s *session, m *T) *connect.Request[T] {
	req := connect.NewRequest(m)
	if s.token != "" {
		req.Header().Set("Authorization", "Bearer "+s.token)
	}
	return req
}

// viewing serves h to an operator or admin only; anyone else gets the
// login form and no data. A POST must carry the session's form token.
func (d *Dashboard) viewing(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := &session{CSRF: d.csrf(w, r)}
		if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			s.token, s.header = strings.TrimSpace(tok), true
		} else if c, err := r.Cookie(tokenCookie); err == nil {
			s.token = c.Value
		}
		v, err := d.cfg.Identify(s.token)
		if (err != nil || !v.CanView) && r.Header.Get(fragmentHeader) == "true" {
			// A live fragment whose session ended: say so in place.
			d.clearToken(w)
			d.fail(w, r, s, http.StatusUnauthorized, "Your session has ended: log in again.")
			return
		}
		switch {
		case err != nil && s.token == "":
			d.loginPage(w, r, http.StatusUnauthorized, s.CSRF, "Log in with an operator or admin token to see this node.")
			return
		case err != nil:
			d.clearToken(w)
			d.loginPage(w, r, http.StatusUnauthorized, s.CSRF, "That token is not accepted: "+err.Error()+".")
			return
		case !v.CanView:
			d.loginPage(w, r, http.StatusForbidden, s.CSRF,
				fmt.Sprintf("Token %q may not inspect this node: the dashboard needs an operator or admin token.", v.Name))
			return
		}
		s.Viewer = v
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if !s.header && !d.formTokenOK(r) {
				d.fail(w, r, s, http.StatusForbidden, "This form is stale or came from another site: reload the page and try again.")
				return
			}
		}
		h(w, r, s)
	}
}

// sameOrigin refuses (403) a POST that a browser says came from another
// origin, by Sec-Fetch-Site or else by an Origin that is not this Host
// (net/http's CrossOriginProtection, as OWASP's CSRF guidance advises).
// A request with neither header is no browser's (curl, scripts) and
// passes. The form token alone would not do: a page on another port of
// the same host is same-site, so it may set the form token's cookie for
// this one (cookies ignore ports) and post a form that matches it.
func (d *Dashboard) sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	if err := d.origins.Check(r); err != nil {
		from := r.Header.Get("Origin")
		if from == "" {
			from = err.Error()
		}
		d.fail(w, r, &session{}, http.StatusForbidden,
			fmt.Sprintf("This form came from another site (%s): nothing was done. Send it from the dashboard's own pages.", from))
		return false
	}
	return true
}

// csrf is the browser's form token, made (and set as a cookie) on its
// first visit.
func (d *Dashboard) csrf(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 32 {
		return c.Value
	}
	b := make([]byte, 16)
	rand.Read(b)
	v := hex.EncodeToString(b)
	d.setCookie(w, csrfCookie, v, 0)
	// The page rendered now must carry the new token, and a later read of
	// the cookie in this request sees it too.
	r.AddCookie(&http.Cookie{Name: csrfCookie, Value: v})
	return v
}

func (d *Dashboard) formTokenOK(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	form := r.PostFormValue("csrf")
	return err == nil && form != "" && subtle.ConstantTimeCompare([]byte(c.Value), []byte(form)) == 1
}

func (d *Dashboard) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/ui/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: d.cfg.Secure})
}

func (d *Dashboard) clearToken(w http.ResponseWriter) { d.setCookie(w, tokenCookie, "", -1) }

func (d *Dashboard) loginForm(w http.ResponseWriter, r *http.Request) {
	d.loginPage(w, r, http.StatusOK, d.csrf(w, r), "")
}

// login checks the token before keeping it, so a mistyped one is told at
// once, and a worker's is refused (it may not inspect).
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	csrf := d.csrf(w, r)
	if !d.formTokenOK(r) {
		d.loginPage(w, r, http.StatusForbidden, csrf, "This form is stale or came from another site: reload the page and try again.")
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if tok == "" {
		d.loginPage(w, r, http.StatusBadRequest, csrf, "Paste a bearer token (the one `leasehold auth token` printed).")
		return
	}
	v, err := d.cfg.Identify(tok)
	if err != nil {
		d.loginPage(w, r, http.StatusUnauthorized, csrf, "That token is not accepted: "+err.Error()+".")
		return
	}
	if !v.CanView {
		d.loginPage(w, r, http.StatusForbidden, csrf,
			fmt.Sprintf("Token %q may not inspect this node: the dashboard needs an operator or admin token.", v.Name))
		return
	}
	d.setCookie(w, tokenCookie, tok, 0)
	http.Redirect(w, r, "/ui/leases", http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if d.formTokenOK(r) {
		d.clearToken(w)
		d.streams.end(d.csrf(w, r)) // this browser's live pages end with its session
	}
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
