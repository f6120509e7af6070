package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/smalldisk"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestDiskFullHealthAndReadiness: once a node's disk is full and a log
// write fails, its acquires are refused as unavailable naming the full
// disk, and /readyz and /healthz both answer 503 with that reason (the
// node stopped and needs a restart), instead of "no leader" and 200.
func TestDiskFullHealthAndReadiness(t *testing.T) {
	dir := smalldisk.Mount(t, 16<<20)
	n := testcluster.StartNode(t, dir, func(c *cluster.Config) { c.WALSegmentSize = 1 << 20 })
	hc := &http.Client{Timeout: 10 * time.Second}
	pad := strings.Repeat("x", 3<<10) // fills the log fast
	seq := 0
	acquire := func() (int, string) {
		seq++
		body := fmt.Sprintf(`{"resources":["r%d"],"ttl":"3600s","metadata":{"pad":%q}}`, seq, pad)
		resp, err := hc.Post(n.URL+"/leasehold.v1.Leases/Acquire", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for range 20 {
		if code, body := acquire(); code != http.StatusOK {
			t.Fatalf("acquire before the disk filled: %d %s", code, body)
		}
	}

	smalldisk.Fill(t, dir, 0)
	var code int
	var body string
	for deadline := time.Now().Add(60 * time.Second); ; {
		if code, body = acquire(); code != http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acquires still succeed on a full disk after %d", seq)
		}
	}
	var e struct{ Code, Message string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Code != "unavailable" || !strings.Contains(e.Message, "disk full") {
		t.Errorf("refused acquire: %d %s; want code unavailable naming the full disk", code, body)
	}

	get := func(path string) (int, string) {
		resp, err := hc.Get(n.URL + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		waitFor(t, 10*time.Second, path+" 503 naming the full disk and the data dir", func() (bool, string) {
			code, body := get(path)
			return code == http.StatusServiceUnavailable && strings.Contains(body, "disk full") &&
				strings.Contains(body, dir), fmt.Sprint(code, " ", body)
		})
	}
	if code, body := acquire(); code == http.StatusOK || !strings.Contains(body, "disk full") {
		t.Errorf("acquire on the stopped node: %d %s", code, body)
	}
}

// TestDiskFullOnOneNodeOfThree: when one node's disk fills, that node stops
// (and says why) while the other two go on granting; restarted with space
// again, it catches up to the same state, with every lease acknowledged
// before, during and after its fault, and tokens keep growing. The node
// whose disk fills leads, or follows.
func TestDiskFullOnOneNodeOfThree(t *testing.T) {
	t.Run("leader", func(t *testing.T) { testDiskFullOnOneOfThree(t, true) })
	t.Run("follower", func(t *testing.T) { testDiskFullOnOneOfThree(t, false) })
}

func testDiskFullOnOneOfThree(t *testing.T, leads bool) {
	mnt := smalldisk.Mount(t, 16<<20)
	c := testcluster.Start(t, 3, func(cfg *cluster.Config) {
		cfg.WALSegmentSize = 1 << 20
		if cfg.NodeID == "n1" {
			cfg.DataDir = mnt
		}
	})
	waitFor(t, 30*time.Second, fmt.Sprintf("n1 leads: %v", leads), func() (bool, string) {
		lead := c.Leader()
		if lead >= 0 && (lead == 0) == leads {
			return true, ""
		}
		if lead >= 0 {
			to := "n2"
			if leads {
				to = "n1"
			}
			c.Node(lead).Cluster.TransferLeadership(to)
		}
		return false, fmt.Sprint("leader ", lead)
	})
	cl := newTestClient(t, 5*time.Second, c.URLs()...)
	pad := map[string]string{"pad": strings.Repeat("x", 3<<10)} // fills the log fast
	acked := map[string]uint64{}
	var maxToken uint64
	seq := 0
	acquire := func() {
		t.Helper()
		seq++
		res := fmt.Sprint("r", seq)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := cl.Acquire(ctx, res, client.TTL(time.Hour), client.Metadata(pad), client.ManualRenew())
		if err != nil {
			t.Fatalf("acquire %s: %v", res, err)
		}
		if l.Token() <= maxToken {
			t.Fatalf("acquire %s: token %d after %d", res, l.Token(), maxToken)
		}
		acked[res], maxToken = l.Token(), l.Token()
	}
	for range 20 {
		acquire()
	}

	free := smalldisk.Fill(t, mnt, 0)
	n1 := c.Node(0)
	for deadline := time.Now().Add(60 * time.Second); n1.Cluster.Fault() == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("n1 has not stopped on its full disk after %d acquires", len(acked))
		}
		acquire() // the others keep granting, whoever leads
	}
	t.Logf("n1 stopped after %d acquires: %v", len(acked), n1.Cluster.Fault())
	waitFor(t, 10*time.Second, "n1 /readyz 503 naming the full disk", func() (bool, string) {
		code, body := httpGet(n1.URL + "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "disk full"), fmt.Sprint(code, " ", body)
	})
	for range 20 {
		acquire()
	}

	c.Kill(0)
	free()
	c.Restart(0)
	lead := c.WaitLeader(15 * time.Second)
	if err := c.WaitApplied(c.Node(lead).Cluster.LocalStatus().CommitIndex, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	acquire() // one more, so every node has applied the same last index
	if err := c.WaitApplied(c.Node(lead).Cluster.LocalStatus().CommitIndex, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	idx0, st0 := c.Node(0).Cluster.EncodedState()
	idxL, stL := c.Node(lead).Cluster.EncodedState()
	if idx0 != idxL || !bytes.Equal(st0, stL) {
		t.Fatalf("restarted n1 at index %d differs from the leader at %d", idx0, idxL)
	}
	for res, tok := range acked {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		g, err := cl.Get(ctx, res)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if g.Holder == nil || g.Holder.Token != tok {
			t.Fatalf("%s held as %+v, want the acknowledged token %d", res, g.Holder, tok)
		}
	}
}

func httpGet(url string) (int, string) {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
