package ui

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Over TLS the cookies are Secure, besides HttpOnly and SameSite=Strict.
func TestCookiesAreSecureUnderTLS(t *testing.T) {
	d := &Dashboard{cfg: Config{Secure: true}}
	w := httptest.NewRecorder()
	d.setCookie(w, tokenCookie, "x", 0)
	c := w.Result().Cookies()[0]
	if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie under TLS: %+v", c)
	}
}
