package httpfence_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fence/httpfence"
)

// trackingBody records whether it was closed.
type trackingBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackingBody) Close() error { b.closed.Store(true); return nil }

func TestTransport(t *testing.T) {
	var got atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Values(httpfence.HeaderName))
	}))
	defer ts.Close()

	var token atomic.Uint64
	token.Store(42)
	tr := &httpfence.Transport{
		Base:     ts.Client().Transport,
		Resource: "jobs/a b",
		Source:   httpfence.TokenFunc(token.Load),
	}
	c := &http.Client{Transport: tr}

	req, _ := http.NewRequest("POST", ts.URL, strings.NewReader("x"))
	req.Header.Set(httpfence.HeaderName, "resource=forged; token=999")
	r := do(t, c, req)
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	if v := got.Load().([]string); len(v) != 1 || v[0] != "resource=jobs/a%20b; token=42" {
		t.Fatalf("server saw %q", v)
	}
	if v := req.Header.Get(httpfence.HeaderName); v != "resource=forged; token=999" {
		t.Fatalf("Transport modified the caller's request: %q", v)
	}

	// The token is read per request: a new lease's token goes out at once.
	token.Store(43)
	do(t, c, must(http.NewRequest("GET", ts.URL, nil)))
	if v := got.Load().([]string); v[0] != "resource=jobs/a%20b; token=43" {
		t.Fatalf("server saw %q", v)
	}

	// Token 0 is a degraded lease: refused, and the body is closed.
	token.Store(0)
	body := &trackingBody{Reader: strings.NewReader("x")}
	_, err := c.Do(must(http.NewRequest("POST", ts.URL, body)))
	if !errors.Is(err, httpfence.ErrZeroToken) {
		t.Fatalf("token 0: %v, want ErrZeroToken", err)
	}
	if !body.closed.Load() {
		t.Fatal("request body not closed on refusal")
	}
	tr.AllowZeroToken = true
	do(t, c, must(http.NewRequest("GET", ts.URL, nil)))
	if v := got.Load().([]string); v[0] != "resource=jobs/a%20b; token=0" {
		t.Fatalf("server saw %q", v)
	}

	bad := &httpfence.Transport{Base: tr.Base, Resource: "bad\tname", Source: httpfence.TokenFunc(func() uint64 { return 1 })}
	if _, err := bad.RoundTrip(must(http.NewRequest("GET", ts.URL, nil))); !errors.Is(err, leasehold.ErrInvalid) {
		t.Fatalf("invalid resource: %v", err)
	}
	if _, err := (&httpfence.Transport{Resource: "a"}).RoundTrip(must(http.NewRequest("GET", ts.URL, nil))); err == nil {
		t.Fatal("nil Source: no error")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
