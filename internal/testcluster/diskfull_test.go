package testcluster

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/smalldisk"
)

// TestDiskFullHealthAndReadiness: once a node's disk is full and a log
// write fails, its acquires are refused as unavailable naming the full
// disk, and /readyz and /healthz both answer 503 with that reason (the
// node stopped and needs a restart), instead of "no leader" and 200.
func TestDiskFullHealthAndReadiness(t *testing.T) {
	dir := smalldisk.Mount(t, 16<<20)
	n := StartNode(t, dir, func(c *cluster.Config) { c.WALSegmentSize = 1 << 20 })
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
