package httpfence_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fence/httpfence"
)

// failingStore fails every Advance with err.
type failingStore struct{ err error }

func (s failingStore) Advance(context.Context, string, uint64) (uint64, bool, error) {
	return 0, false, s.err
}

func TestMiddleware(t *testing.T) {
	var (
		mu      sync.Mutex
		rejects []string
		handled []httpfence.Fence
	)
	store := &httpfence.MemoryStore{}
	h := httpfence.Middleware(store,
		httpfence.OnReject(func(r string, offered, current uint64) {
			mu.Lock()
			defer mu.Unlock()
			rejects = append(rejects, fmt.Sprintf("%s:%d<%d", r, offered, current))
		}),
		httpfence.RequireResource(func(r *http.Request) string { return r.URL.Query().Get("resource") }),
	)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := httpfence.FromContext(r.Context())
		if !ok {
			t.Error("handler without a fence in its context")
		}
		mu.Lock()
		handled = append(handled, f)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	ts := httptest.NewServer(h)
	defer ts.Close()
	c := ts.Client()

	send := func(query string, headers ...string) reply {
		t.Helper()
		req, err := http.NewRequest("POST", ts.URL+"/"+query, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range headers {
			req.Header.Add(httpfence.HeaderName, v)
		}
		return do(t, c, req)
	}
	wantInvalid := func(r reply, msgPart string) {
		t.Helper()
		if r.status != http.StatusBadRequest {
			t.Fatalf("status %d (%s), want 400", r.status, r.body)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
		m := r.json(t)
		if m["error"] != "invalid" || !strings.Contains(fmt.Sprint(m["message"]), msgPart) {
			t.Fatalf("body %s, want error invalid mentioning %q", r.body, msgPart)
		}
	}

	wantInvalid(send(""), "missing Leasehold-Fence")
	wantInvalid(send("", "resource=a; token=1", "resource=a; token=2"), "2 Leasehold-Fence headers")
	wantInvalid(send("", "resource=a; token=x"), "not a decimal")
	wantInvalid(send("?resource=b", "resource=a; token=1"), `names resource "a", but this request writes "b"`)

	for _, tok := range []int{5, 5, 6} {
		if r := send("?resource=a", fmt.Sprintf("resource=a; token=%d", tok)); r.status != http.StatusNoContent {
			t.Fatalf("token %d: status %d %s", tok, r.status, r.body)
		}
	}

	r := send("", "resource=a; token=4")
	if r.status != http.StatusConflict {
		t.Fatalf("stale: status %d %s, want 409", r.status, r.body)
	}
	want := `{"error":"stale_token","resource":"a","offered":4,"current":6,"message":"stale fencing token for resource \"a\": offered 4, current 6"}` + "\n"
	if string(r.body) != want {
		t.Fatalf("stale body\n%s\nwant\n%s", r.body, want)
	}
	// A name that needs encoding comes back decoded in the JSON body.
	send("", "resource=x%3By; token=9")
	if m := send("", "resource=x%3By; token=8").json(t); m["resource"] != "x;y" || m["current"] != 9.0 {
		t.Fatalf("stale body %v", m)
	}

	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(rejects, " "); got != "a:4<6 x;y:8<9" {
		t.Fatalf("OnReject calls: %s", got)
	}
	if len(handled) != 4 || handled[2] != (httpfence.Fence{Resource: "a", Token: 6}) {
		t.Fatalf("handled %+v", handled)
	}
	if cur, ok := store.Current("a"); !ok || cur != 6 {
		t.Fatalf("mark %d, %v", cur, ok)
	}
}

func TestMiddlewareStoreErrors(t *testing.T) {
	var reported []error
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("handler ran despite a store error")
	})
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{errors.New("connection refused"), http.StatusServiceUnavailable, "unavailable"},
		{leasehold.Errorf(leasehold.CodeInvalid, "token too large for this store"), http.StatusBadRequest, "invalid"},
	} {
		h := httpfence.Middleware(failingStore{tc.err},
			httpfence.OnError(func(r *http.Request, err error) { reported = append(reported, err) }))(next)
		req := httptest.NewRequest("PUT", "/", nil)
		req.Header.Set(httpfence.HeaderName, "resource=a; token=1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), `"error":"`+tc.code+`"`) {
			t.Errorf("store error %v: %d %s", tc.err, rec.Code, rec.Body)
		}
		// The message of an unavailable store stays generic: its error may
		// name hosts or SQL.
		if tc.status == http.StatusServiceUnavailable && strings.Contains(rec.Body.String(), "refused") {
			t.Errorf("store error text leaked: %s", rec.Body)
		}
	}
	if len(reported) != 1 || reported[0].Error() != "connection refused" {
		t.Fatalf("OnError got %v", reported)
	}
}

func TestMemoryStoreConcurrent(t *testing.T) {
	var s httpfence.MemoryStore
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 500 {
				tok := uint64(i*16 + g)
				cur, ok, err := s.Advance(context.Background(), "r", tok)
				if err != nil || (ok && cur != tok) || (!ok && cur <= tok) {
					t.Errorf("Advance(%d) = %d, %v, %v", tok, cur, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if cur, _ := s.Current("r"); cur != 499*16+15 {
		t.Fatalf("final mark %d, want %d", cur, 499*16+15)
	}
}
