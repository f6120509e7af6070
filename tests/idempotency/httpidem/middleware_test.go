package httpidem_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/fence/httpfence"
	"github.com/leasehold/leasehold/idempotency/httpidem"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// Each status the middleware answers, with a real HTTP server in front of
// a real leasehold node.

type fixture struct {
	url   string
	runs  atomic.Int32
	block chan struct{} // when set, the handler waits on it
	mu    sync.Mutex
}

func newFixture(t *testing.T, cfg httpidem.Config, status int) *fixture {
	t.Helper()
	n := testcluster.StartNode(t, "")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(client.Config{Endpoints: []string{n.URL}, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	cfg.Client = c
	h := httpidem.Middleware(cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		run := f.runs.Add(1)
		f.mu.Lock()
		block := f.block
		f.mu.Unlock()
		if block != nil {
			<-block
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/payments/1")
		w.Header().Set("X-Not-Stored", "x")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]any{"run": run, "body": string(body), "token": httpidem.Token(r.Context()), "key": httpidem.Key(r.Context())})
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func send(t *testing.T, url, key, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(t, 30*time.Second), http.MethodPost, url+"/payments", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(httpidem.Header, key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func wantProblem(t *testing.T, res *http.Response, body string, status int, mention string) {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("status %d (%s), want %d", res.StatusCode, body, status)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json", ct)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(body), &p); err != nil || p["status"] != float64(status) || p["title"] == "" {
		t.Fatalf("not a problem details body: %s", body)
	}
	if !strings.Contains(body, mention) {
		t.Fatalf("problem %s does not mention %q", body, mention)
	}
}

func TestReplayReturnsTheStoredResponse(t *testing.T) {
	f := newFixture(t, httpidem.Config{}, http.StatusCreated)
	first, body1 := send(t, f.url, `"k-1"`, `{"amount":10}`)
	if first.StatusCode != http.StatusCreated || first.Header.Get(httpidem.ReplayedHeader) != "" {
		t.Fatalf("first: %d %v", first.StatusCode, first.Header)
	}
	again, body2 := send(t, f.url, `"k-1"`, `{"amount":10}`)
	if again.StatusCode != http.StatusCreated || body2 != body1 || again.Header.Get(httpidem.ReplayedHeader) != "true" ||
		again.Header.Get("Location") != "/payments/1" || again.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("replay: %d %v %s, want %s", again.StatusCode, again.Header, body2, body1)
	}
	if again.Header.Get("X-Not-Stored") != "" {
		t.Fatal("a header outside Config.Headers was replayed")
	}
	if n := f.runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
	if !strings.Contains(body1, `"key":"k-1"`) {
		t.Fatalf("the handler did not see the parsed key: %s", body1)
	}
}

func TestConcurrentRequestGets409(t *testing.T) {
	f := newFixture(t, httpidem.Config{}, http.StatusOK)
	block := make(chan struct{})
	f.mu.Lock()
	f.block = block
	f.mu.Unlock()
	done := make(chan *http.Response, 1)
	go func() {
		res, _ := send(t, f.url, `"k-2"`, `{"amount":10}`)
		done <- res
	}()
	testutil.Eventually(t, 10*time.Second, "the first request runs", func() bool { return f.runs.Load() == 1 })
	res, body := send(t, f.url, `"k-2"`, `{"amount":10}`)
	wantProblem(t, res, body, http.StatusConflict, "in progress")
	close(block)
	if first := <-done; first.StatusCode != http.StatusOK {
		t.Fatalf("first: %d", first.StatusCode)
	}
}

func TestReusedKeyWithAnotherPayloadGets422(t *testing.T) {
	f := newFixture(t, httpidem.Config{}, http.StatusOK)
	send(t, f.url, `"k-3"`, `{"amount":10}`)
	res, body := send(t, f.url, `"k-3"`, `{"amount":9999}`)
	wantProblem(t, res, body, http.StatusUnprocessableEntity, "different request")
	if strings.Contains(body, "9999") {
		t.Fatalf("the problem shows the payload: %s", body)
	}
}

func TestMissingOrMalformedKeyGets400(t *testing.T) {
	f := newFixture(t, httpidem.Config{Required: true}, http.StatusOK)
	res, body := send(t, f.url, "", `{}`)
	wantProblem(t, res, body, http.StatusBadRequest, "Idempotency-Key")
	res, body = send(t, f.url, `"unterminated`, `{}`)
	wantProblem(t, res, body, http.StatusBadRequest, "quoted string")
	if n := f.runs.Load(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
}

// A response worth retrying (5xx) is not stored: the retry runs again.
func TestServerErrorIsNotStored(t *testing.T) {
	f := newFixture(t, httpidem.Config{}, http.StatusBadGateway)
	send(t, f.url, `"k-5"`, `{}`)
	res, _ := send(t, f.url, `"k-5"`, `{}`)
	if res.StatusCode != http.StatusBadGateway || res.Header.Get(httpidem.ReplayedHeader) != "" || f.runs.Load() != 2 {
		t.Fatalf("retry after a 502: %d, replayed %q, runs %d", res.StatusCode, res.Header.Get(httpidem.ReplayedHeader), f.runs.Load())
	}
}

// The attempt's token fences an outbound call through httpfence: the
// downstream sees each new attempt with a larger token.
func TestComposesWithHTTPFence(t *testing.T) {
	store := &httpfence.MemoryStore{}
	var seen []uint64
	var mu sync.Mutex
	downstream := httptest.NewServer(httpfence.Middleware(store)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fe, _ := httpfence.FromContext(r.Context())
		mu.Lock()
		seen = append(seen, fe.Token)
		mu.Unlock()
	})))
	t.Cleanup(downstream.Close)
	n := testcluster.StartNode(t, "")
	c, err := client.New(client.Config{Endpoints: []string{n.URL}})
	if err != nil {
		t.Fatal(err)
	}
	h := httpidem.Middleware(httpidem.Config{Client: c}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hc := &http.Client{Transport: &httpfence.Transport{Resource: "ledger", Source: httpidem.TokenSource(r.Context())}}
		res, err := hc.Post(downstream.URL, "text/plain", bytes.NewReader(nil))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		res.Body.Close()
		w.WriteHeader(res.StatusCode)
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for _, k := range []string{`"a"`, `"b"`} {
		if res, body := send(t, srv.URL, k, "x"); res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", k, res.StatusCode, body)
		}
	}
	if len(seen) != 2 || seen[0] == 0 || seen[1] <= seen[0] {
		t.Fatalf("downstream saw tokens %v, want two increasing attempt tokens", seen)
	}
}
