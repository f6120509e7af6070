package main_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EWatchPrintsEachChangeUntilInterrupted: `leasehold watch a/ --json
// --from-index 0` prints one line per change under a/ (and nothing for
// b/), in log order, and exits 0 on SIGINT.
func TestE2EWatchPrintsEachChangeUntilInterrupted(t *testing.T) {
	n := startNode(t)
	w := startProc(t, n.dir, "watch", childEnv(), "watch", "--endpoints", n.url, "--json", "--from-index", "0", "a/")
	a := n.acquire("a/x", "--ttl", "1m")
	n.acquire("b/y", "--ttl", "1m")
	n.lhOK("release", "--lease", fmt.Sprint(a.LeaseID), "--secret", a.Secret)

	type line struct {
		Index     uint64   `json:"index"`
		Kind      string   `json:"kind"`
		LeaseID   uint64   `json:"lease_id"`
		Token     uint64   `json:"token"`
		Resources []string `json:"resources"`
	}
	var lines []line
	checkFor(t, 10*time.Second, func() error {
		lines = lines[:0]
		for _, l := range strings.Split(strings.TrimSpace(w.Stdout()), "\n") {
			if l == "" {
				continue
			}
			var e line
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				return fmt.Errorf("line %q: %v", l, err)
			}
			lines = append(lines, e)
		}
		if len(lines) < 2 {
			return fmt.Errorf("%d lines so far: %q (stderr %q)", len(lines), w.Stdout(), w.Stderr())
		}
		return nil
	})
	if len(lines) != 2 || lines[0].Kind != "granted" || lines[1].Kind != "released" ||
		lines[0].LeaseID != a.LeaseID || lines[0].Token != a.Token || lines[0].Resources[0] != "a/x" ||
		lines[1].Index <= lines[0].Index {
		t.Fatalf("watch a/ printed %+v; want a/x granted (lease %d) then released", lines, a.LeaseID)
	}
	if strings.Contains(w.Stdout(), a.Secret) {
		t.Fatal("the watch printed the lease's secret")
	}
	w.Cmd.Process.Signal(syscall.SIGINT)
	if !w.Wait(exitTimeout) || w.Code() != 0 {
		t.Fatalf("watch after SIGINT: exited=%v code=%d stderr=%q", w.Exited(), w.Code(), w.Stderr())
	}
}

// TestE2EWatchOverPlainHTTP: the curl of the README — a Connect streaming
// POST with an enveloped JSON body — gets enveloped JSON messages: the
// opening mark, then the events.
func TestE2EWatchOverPlainHTTP(t *testing.T) {
	n := startNode(t)
	a := n.acquire("jobs/1", "--ttl", "1m")
	body := []byte(`{"prefixes":["jobs/"],"fromIndex":"0"}`)
	var env bytes.Buffer
	env.WriteByte(0)
	binary.Write(&env, binary.BigEndian, uint32(len(body)))
	env.Write(body)
	req, _ := http.NewRequest("POST", n.url+"/leasehold.v1.Watch/Watch", &env)
	req.Header.Set("Content-Type", "application/connect+json")
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("HTTP %d: %s", resp.StatusCode, b)
	}
	read := func() string {
		var hdr [5]byte
		if _, err := io.ReadFull(resp.Body, hdr[:]); err != nil {
			t.Fatal(err)
		}
		msg := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
		if _, err := io.ReadFull(resp.Body, msg); err != nil {
			t.Fatal(err)
		}
		return string(msg)
	}
	if first := read(); first != `{}` && !strings.Contains(first, `"index"`) {
		t.Fatalf("opening message %s", first)
	}
	second := read()
	if !strings.Contains(second, `"kind":"granted"`) || !strings.Contains(second, fmt.Sprintf(`"leaseId":"%d"`, a.LeaseID)) {
		t.Fatalf("second message %s: want lease %d granted", second, a.LeaseID)
	}
}

// TestE2EServeRefusesAWatchHistoryOutOfBounds: --watch-history outside
// 1000..10000000 is refused with a message naming the bounds.
func TestE2EServeRefusesAWatchHistoryOutOfBounds(t *testing.T) {
	n := newNode(t)
	r := lhEnv(t, childEnv(), "serve", "--data-dir", n.dataDir, "--api-addr", n.apiAddr, "--raft-addr", n.raftAddr,
		"--watch-history", "5")
	if r.code == 0 || !strings.Contains(r.stderr, "--watch-history 5: give 1000 to 10000000") {
		t.Fatalf("serve --watch-history 5: %s", r)
	}
}
