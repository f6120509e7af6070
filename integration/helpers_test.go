package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/client"

	"github.com/leasehold/leasehold/internal/testutil"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// Helpers shared by the cluster tests in this package.

// newTestClient makes a Go client for urls with its own transport (closed
// when the test ends) and a silent logger. perTry bounds one attempt.
func newTestClient(t testing.TB, perTry time.Duration, urls ...string) *client.Client {
	t.Helper()
	return newCountingClient(t, perTry, nil, urls...)
}

// newCountingClient is newTestClient whose transport also counts failed
// round trips in ct (if not nil).
func newCountingClient(t testing.TB, perTry time.Duration, ct *countingTransport, urls ...string) *client.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	session := client.SessionDefault
	if testcluster.SessionsOn() {
		// Every lease call on a session stream, over h2c.
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols, session = &p, client.SessionOn
	}
	t.Cleanup(tr.CloseIdleConnections)
	var rt http.RoundTripper = tr
	if ct != nil {
		ct.next = tr
		rt = ct
	}
	c, err := client.New(client.Config{
		Endpoints:      urls,
		HTTPClient:     &http.Client{Transport: rt},
		Logger:         testcluster.Logger(),
		RequestTimeout: perTry,
		Session:        session,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// countingTransport counts the round trips a client had to retry: transport
// failures and 5xx answers (Unavailable maps to 503).
type countingTransport struct {
	next     http.RoundTripper
	failures atomic.Int64
	unavail  atomic.Int64
	total    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.total.Add(1)
	resp, err := c.next.RoundTrip(r)
	switch {
	case err != nil:
		c.failures.Add(1)
	case resp.StatusCode >= 500:
		c.unavail.Add(1)
	}
	return resp, err
}

// rawLeases is a bare Connect client for one node, for requests whose
// request ID and secret the test chooses.
func rawLeases(t testing.TB, url string) leaseholdv1connect.LeasesClient {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return leaseholdv1connect.NewLeasesClient(&http.Client{Transport: tr}, url)
}

// ctxFor and waitFor keep their old names for this package's tests.
var (
	ctxFor  = testutil.Context
	waitFor = testutil.Eventually[func() (bool, string)]
)

// waitSameState waits until every running member reports the same state
// machine index, then requires identical state bytes there. Different bytes
// at one index are a divergence and fail at once.
func waitSameState(t testing.TB, c *testcluster.Cluster, timeout time.Duration) (index uint64, size int) {
	t.Helper()
	waitFor(t, timeout, "replicas converge on one state", func() (bool, string) {
		var idx []uint64
		var states [][]byte
		var ids []string
		for i := range c.Size() {
			n := c.Node(i)
			if n == nil || c.Removed(i) {
				continue
			}
			ix, st := n.Cluster.EncodedState()
			idx, states, ids = append(idx, ix), append(states, st), append(ids, c.ID(i))
		}
		for k := 1; k < len(idx); k++ {
			if idx[k] != idx[0] {
				return false, fmt.Sprintf("indexes %v of %v", idx, ids)
			}
		}
		for k := 1; k < len(states); k++ {
			if !bytes.Equal(states[k], states[0]) {
				t.Fatalf("DIVERGENCE: %s and %s are both at index %d with different states (%d vs %d bytes)",
					ids[0], ids[k], idx[0], len(states[0]), len(states[k]))
			}
		}
		index, size = idx[0], len(states[0])
		return true, ""
	})
	return index, size
}

// leaderIndex is the applied raft index of the current leader.
func leaderIndex(t testing.TB, c *testcluster.Cluster) uint64 {
	t.Helper()
	l := c.WaitLeader(10 * time.Second)
	return c.Node(l).Cluster.LocalStatus().AppliedIndex
}

// holderID is the id of the lease holding the resource r shows, 0 if free.
func holderID(r *client.ResourceInfo) uint64 {
	if r.Holder == nil {
		return 0
	}
	return r.Holder.ID
}

// memberIDs lists the ids in the client's view of the configuration.
func memberIDs(ctx context.Context, cl *client.Client) ([]string, error) {
	ms, err := cl.Members(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	return ids, nil
}

// waitMembers waits until both the leader's own configuration and the
// configuration answered through cl list exactly want.
func waitMembers(t testing.TB, c *testcluster.Cluster, cl *client.Client, timeout time.Duration, want ...string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	waitFor(t, timeout, "members "+strings.Join(want, ","), func() (bool, string) {
		l := c.Leader()
		if l < 0 {
			return false, "no leader"
		}
		n := c.Node(l)
		if n == nil {
			return false, "leader stopped"
		}
		ms, err := n.Cluster.Members()
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, m := range ms {
			got = append(got, m.ID)
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			return false, fmt.Sprintf("leader %s has %v", c.ID(l), got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		viaAPI, err := memberIDs(ctx, cl)
		if err != nil {
			return false, "Members: " + err.Error()
		}
		if !slices.Equal(viaAPI, want) {
			return false, fmt.Sprintf("Members via the API: %v", viaAPI)
		}
		return true, ""
	})
}

// snapshotMeta is the part of raft's file snapshot metadata a test reads.
type snapshotMeta struct {
	ID    string
	Index uint64
	Term  uint64
}

// snapshots lists the complete snapshots in a node's data dir.
func snapshots(t testing.TB, dataDir string) []snapshotMeta {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(dataDir, "snapshots", "*", "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []snapshotMeta
	for _, p := range dirs {
		if strings.HasSuffix(filepath.Dir(p), ".tmp") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue // reaped meanwhile
		}
		var m snapshotMeta
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, m)
	}
	return out
}

// readyz returns the status code of a node's /readyz (0 if unreachable).
func readyz(url string) int {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(url + "/readyz")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// median is the middle of measured times.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
