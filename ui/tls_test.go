package ui_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// Over TLS the session cookie is Secure, and the pages read the API as
// over plain HTTP.
func TestDashboardOverTLS(t *testing.T) {
	certs := testcluster.NewCerts(t)
	auth, err := server.NewAuthenticator(server.AuthFile{Tokens: []server.TokenEntry{
		{Name: "olga", SHA256: server.HashToken(operatorTok), Role: "operator"}}})
	if err != nil {
		t.Fatal(err)
	}
	n := testcluster.StartServerNode(t, func(c *server.Config) {
		c.Auth = auth
		c.TLS = &tls.Config{Certificates: []tls.Certificate{certs.Server}, MinVersion: tls.VersionTLS12}
	})
	jar, _ := cookiejar.New(nil)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.CAPool}}
	defer tr.CloseIdleConnections()
	br := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := br.Get(n.HTTPSURL() + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("no form token:\n%s", b)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "leasehold_csrf" && !c.Secure {
			t.Fatalf("the form token's cookie is not Secure over TLS: %+v", c)
		}
	}
	resp, err = br.PostForm(n.HTTPSURL()+"/ui/login", url.Values{"csrf": {m[1]}, "token": {operatorTok}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "leasehold_token" {
			session = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || session == nil || !session.Secure || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login over TLS: HTTP %d, session cookie %+v; want Secure, HttpOnly, SameSite=Strict", resp.StatusCode, session)
	}
	resp, err = br.Get(n.HTTPSURL() + "/ui/cluster/rows")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Leader") {
		t.Fatalf("the cluster rows over TLS: HTTP %d:\n%s", resp.StatusCode, b)
	}
}
