package bench

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/fsm"
)

// The embedded node is wired like a served one: its /metrics carries the
// raft progress of the node watcher and the commit latency of the entries
// it proposed.
func TestEmbeddedMetricsLikeServe(t *testing.T) {
	e, err := StartEmbedded(t.Context(), EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := e.Node.Propose(ctx, &fsm.Put{RequestID: "metrics-test", Key: "k", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, e.URL+"/metrics")
	for _, want := range []string{"leasehold_raft_term ", "leasehold_raft_applied_index "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q (the node watcher)", strings.TrimSpace(want))
		}
	}
	if strings.Contains(body, "leasehold_raft_commit_seconds_count 0\n") || !strings.Contains(body, "leasehold_raft_commit_seconds_count ") {
		t.Errorf("/metrics counts no commit latency after a committed put:\n%s", grep(body, "leasehold_raft_commit_seconds_count"))
	}
}

func grep(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
