package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestReadyzAndClusterStatus: /readyz is 200 on every node of a healthy
// cluster and turns 503 on a node cut off from the others (a follower, then
// the leader) within a bounded time, and back to 200 when healed.
// ClusterStatus lists every node with its role, term and indexes, one
// leader, and an unreachable node as such.
func TestReadyzAndClusterStatus(t *testing.T) {
	const bound = 5 * time.Second
	c := testcluster.Start(t, 3)
	lead := c.WaitLeader(10 * time.Second)
	for i := range 3 {
		waitFor(t, bound, c.ID(i)+" /readyz 200", func() (bool, string) {
			code := readyz(c.URL(i))
			return code == http.StatusOK, fmt.Sprint(code)
		})
	}
	if code := healthz(c.URL(0)); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}

	cl := newTestClient(t, 2*time.Second, c.URLs()...)
	waitFor(t, bound, "ClusterStatus: three nodes, one leader, one term", func() (bool, string) {
		st, err := cl.ClusterStatus(ctxFor(t, 5*time.Second))
		if err != nil {
			return false, err.Error()
		}
		return checkStatus(st, c.ID(lead), "")
	})
	st, _ := cl.ClusterStatus(ctxFor(t, 5*time.Second))
	for _, n := range st {
		t.Logf("status: %s %s term %d commit %d applied %d last %d leader %s", n.ID, n.State, n.Term, n.CommitIndex, n.AppliedIndex, n.LastIndex, n.LeaderID)
	}

	// A follower cut off from the others.
	f := (lead + 1) % 3
	c.Isolate(f)
	cut := time.Now()
	waitFor(t, bound, c.ID(f)+" (isolated follower) /readyz 503", func() (bool, string) {
		code := readyz(c.URL(f))
		return code == http.StatusServiceUnavailable, fmt.Sprint(code)
	})
	t.Logf("isolated follower %s not ready %v after the cut", c.ID(f), time.Since(cut).Round(time.Millisecond))
	if code := readyz(c.URL(lead)); code != http.StatusOK {
		t.Errorf("leader %s /readyz %d with a quorum of two", c.ID(lead), code)
	}
	viaLeader := newTestClient(t, 2*time.Second, c.URL(lead))
	waitFor(t, bound, "ClusterStatus names the cut-off follower unreachable", func() (bool, string) {
		st, err := viaLeader.ClusterStatus(ctxFor(t, 5*time.Second))
		if err != nil {
			return false, err.Error()
		}
		return checkStatus(st, c.ID(lead), c.ID(f))
	})
	c.HealAll()
	waitFor(t, bound, c.ID(f)+" /readyz 200 after healing", func() (bool, string) {
		code := readyz(c.URL(f))
		return code == http.StatusOK, fmt.Sprint(code)
	})

	// The leader cut off from the others.
	lead = c.WaitLeader(10 * time.Second)
	c.Isolate(lead)
	cut = time.Now()
	waitFor(t, bound, c.ID(lead)+" (isolated leader) /readyz 503", func() (bool, string) {
		code := readyz(c.URL(lead))
		return code == http.StatusServiceUnavailable, fmt.Sprint(code)
	})
	t.Logf("isolated leader %s not ready %v after the cut", c.ID(lead), time.Since(cut).Round(time.Millisecond))
	next := c.WaitNewLeader(lead, 10*time.Second)
	waitFor(t, bound, "the new leader "+c.ID(next)+" /readyz 200", func() (bool, string) {
		code := readyz(c.URL(next))
		return code == http.StatusOK, fmt.Sprint(code)
	})
	c.HealAll()
	for i := range 3 {
		waitFor(t, bound, c.ID(i)+" /readyz 200 after healing", func() (bool, string) {
			code := readyz(c.URL(i))
			return code == http.StatusOK, fmt.Sprint(code)
		})
	}
}

// checkStatus says whether st lists three nodes, one of them leader (the
// leader named, if given), all in one term with indexes, and the node
// unreachable (if given) as unreachable with a reason.
func checkStatus(st []client.NodeStatus, leader, unreachable string) (bool, string) {
	if len(st) != 3 {
		return false, fmt.Sprintf("%d nodes", len(st))
	}
	leaders := 0
	var term uint64
	for _, n := range st {
		if n.ID == unreachable {
			if n.State != "unreachable" || n.Error == "" {
				return false, fmt.Sprintf("%s: state %q error %q", n.ID, n.State, n.Error)
			}
			continue
		}
		switch n.State {
		case "Leader":
			leaders++
			if leader != "" && n.ID != leader {
				return false, "leader " + n.ID + ", want " + leader
			}
		case "Follower":
		default:
			return false, n.ID + " " + n.State
		}
		if n.Term == 0 || n.CommitIndex == 0 || n.AppliedIndex == 0 || n.LastIndex == 0 || n.RaftAddr == "" {
			return false, fmt.Sprintf("%s: term %d commit %d applied %d last %d addr %q", n.ID, n.Term, n.CommitIndex, n.AppliedIndex, n.LastIndex, n.RaftAddr)
		}
		if term != 0 && n.Term != term {
			return false, fmt.Sprintf("terms %d and %d", term, n.Term)
		}
		term = n.Term
		if n.LeaderID == "" || (leader != "" && n.LeaderID != leader) {
			return false, n.ID + " follows " + n.LeaderID
		}
	}
	if leaders != 1 {
		return false, fmt.Sprintf("%d leaders", leaders)
	}
	return true, ""
}

func healthz(url string) int {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(url + "/healthz")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	return resp.StatusCode
}
