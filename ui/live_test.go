package ui_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// sseEvent is one event read from a dashboard event stream.
type sseEvent struct{ name, data string }

// openStream opens a dashboard event stream with client (whose cookies
// may carry a session) or a bearer token, and returns its HTTP status and
// its events; the stream ends with the test, or with stop.
func openStream(t *testing.T, client *http.Client, n *testcluster.Node, token, path string) (int, <-chan sseEvent, func()) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	req, _ := http.NewRequestWithContext(ctx, "GET", n.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan sseEvent, 64)
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		close(events)
		return resp.StatusCode, events, stop
	}
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	go func() {
		defer close(done)
		defer close(events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var e sseEvent
		for sc.Scan() {
			switch line := sc.Text(); {
			case line == "" && e.name != "":
				select {
				case events <- e:
				case <-ctx.Done():
					return
				}
				e = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				e.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				if e.data != "" {
					e.data += "\n"
				}
				e.data += line[len("data: "):]
			}
		}
	}()
	return http.StatusOK, events, stop
}

// streamClient reads streams for as long as a test needs them.
var streamClient = &http.Client{}

// next is the next event of the stream, within d.
func next(t *testing.T, events <-chan sseEvent, d time.Duration) (sseEvent, bool) {
	t.Helper()
	select {
	case e, ok := <-events:
		return e, ok
	case <-time.After(d):
		return sseEvent{}, false
	}
}

// A live page's event stream pushes its parts when the node's watch shows
// a change under the viewer's prefixes, and nothing else: a change of
// another tenant neither shows nor pushes (not even as a sign that
// something happened).
func TestEventStreamPushesOnlyTheViewersChanges(t *testing.T) {
	n := startLimitedNode(t)
	status, events, _ := openStream(t, streamClient, n, limitedOperatorTok, "/ui/events?view=leases")
	if status != http.StatusOK {
		t.Fatalf("the stream of a/'s operator: HTTP %d", status)
	}
	if e, ok := next(t, events, 10*time.Second); !ok || e.name != "rows" || !strings.Contains(e.data, "No lease is held") {
		t.Fatalf("the stream's first event: %+v (%v), want the rows as they are", e, ok)
	}
	acquire(t, n, "b/secret", "owner-of-b", "6ec4e75ec4e75ec4e75ec4e75ec4e75e")
	// The view's timer pushes every 5 s; a push within 2 s would be the
	// other tenant's change.
	if e, ok := next(t, events, 2*time.Second); ok {
		t.Fatalf("b/'s grant pushed %s to a/'s operator:\n%s", e.name, e.data)
	}
	acquire(t, n, "a/report", "owner-of-a", "5ec4e75ec4e75ec4e75ec4e75ec4e75e")
	e, ok := next(t, events, 2*time.Second)
	if !ok || e.name != "rows" || !strings.Contains(e.data, "a/report") || !strings.Contains(e.data, "owner-of-a") {
		t.Fatalf("a/'s grant pushed %+v (%v), want the rows with a/report", e, ok)
	}
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); { // the timer's push too
		e, ok := next(t, events, time.Until(deadline))
		if !ok {
			break
		}
		if strings.Contains(e.data, "b/secret") || strings.Contains(e.data, "owner-of-b") {
			t.Fatalf("a/'s stream shows b/'s lease:\n%s", e.data)
		}
	}

	// A view of another tenant's resource, or of the node's figures, is
	// refused before any stream; so is a worker, and a browser without a
	// session is shown the login form.
	for _, path := range []string{"/ui/events?view=leases&prefix=b/", "/ui/events?view=lease&resource=b/secret",
		"/ui/events?view=charts", "/ui/events?view=queue", "/ui/events?view=queue&queue=b/q"} {
		if status, _, _ := openStream(t, streamClient, n, limitedOperatorTok, path); status != http.StatusForbidden && status != http.StatusNotFound {
			t.Errorf("GET %s by a/'s operator: HTTP %d, want 403 (or 404 for a queue that is not there)", path, status)
		}
	}
	if status, _, _ := openStream(t, streamClient, n, workerTok, "/ui/events?view=leases"); status != http.StatusForbidden {
		t.Errorf("a worker's stream: HTTP %d, want 403", status)
	}
	if status, _, _ := openStream(t, streamClient, n, "", "/ui/events?view=leases"); status != http.StatusUnauthorized {
		t.Errorf("a stream without a token: HTTP %d, want 401", status)
	}
}

// The streams are bounded per viewer (and in all): one over the bound is
// refused with 503, so the page polls instead; a closed one frees its
// place; another viewer is not held up by the first's.
func TestEventStreamsAreBounded(t *testing.T) {
	n := startAuthNode(t)
	var stops []func()
	for i := range 8 {
		status, events, stop := openStream(t, streamClient, n, operatorTok, "/ui/events?view=cluster")
		if status != http.StatusOK {
			t.Fatalf("stream %d: HTTP %d", i+1, status)
		}
		if _, ok := next(t, events, 10*time.Second); !ok {
			t.Fatalf("stream %d sent nothing", i+1)
		}
		stops = append(stops, stop)
	}
	if status, _, _ := openStream(t, streamClient, n, operatorTok, "/ui/events?view=cluster"); status != http.StatusServiceUnavailable {
		t.Fatalf("olga's ninth stream: HTTP %d, want 503", status)
	}
	if status, _, _ := openStream(t, streamClient, n, adminTok, "/ui/events?view=cluster"); status != http.StatusOK {
		t.Fatalf("alice's first stream while olga holds 8: HTTP %d, want 200", status)
	}
	stops[0]()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, _ := openStream(t, streamClient, n, operatorTok, "/ui/events?view=cluster")
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream did not free its place within 10s: HTTP %d", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A browser's streams end with its session: logging out ends them with an
// "ended" event, so the page says so instead of reconnecting.
func TestEventStreamEndsWithTheSession(t *testing.T) {
	n := startAuthNode(t)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	csrf := func(path string) string {
		resp, err := browser.Get(n.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		m := csrfField.FindStringSubmatch(b.String())
		if m == nil {
			t.Fatalf("GET %s: no form token:\n%s", path, b.String())
		}
		return m[1]
	}
	post := func(path string, form url.Values) {
		resp, err := browser.PostForm(n.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST %s: HTTP %d", path, resp.StatusCode)
		}
	}
	post("/ui/login", url.Values{"csrf": {csrf("/ui/login")}, "token": {operatorTok}})
	streamer := &http.Client{Jar: jar}
	status, events, _ := openStream(t, streamer, n, "", "/ui/events?view=cluster")
	if status != http.StatusOK {
		t.Fatalf("the logged-in browser's stream: HTTP %d", status)
	}
	if _, ok := next(t, events, 10*time.Second); !ok {
		t.Fatal("the stream sent nothing")
	}
	post("/ui/logout", url.Values{"csrf": {csrf("/ui/cluster")}})
	for deadline := time.Now().Add(10 * time.Second); ; {
		e, ok := next(t, events, time.Until(deadline))
		if !ok {
			t.Fatal("the stream did not end with an ended event within 10s of the logout")
		}
		if e.name == "ended" {
			if !strings.Contains(e.data, "session has ended") {
				t.Fatalf("the ended event says %q", e.data)
			}
			break
		}
	}
	if _, ok := next(t, events, 5*time.Second); ok {
		t.Fatal("the stream goes on after its ended event")
	}
}
