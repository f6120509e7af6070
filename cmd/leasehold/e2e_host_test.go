package main_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/procs"
)

// hostCall POSTs a JSON API call to addr (host:port) with the given Host
// and returns the status and body.
func hostCall(t *testing.T, addr, host, procedure, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+procedure, strings.NewReader(body))
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Timeout: cliTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s (Host %s): %v", procedure, host, err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, string(b)
}

// A cluster of three nodes without auth whose clients know them by names
// (--advertise-api http://nI.leasehold.test:PORT, resolved to loopback by
// the test's dialer): a follower reached by its name forwards to the
// leader, the Go client follows the leader's name, the CLI works by
// address, and a name no node was given is refused with 421, but for the
// one given with LEASEHOLD_ALLOW_HOST on that node.
func TestServeHostNames(t *testing.T) {
	dir := t.TempDir()
	type named struct{ id, api, raft, name string }
	nodes := make([]named, 3)
	var peers []string
	for i := range nodes {
		n := named{id: fmt.Sprintf("n%d", i+1), api: freeAddr(t), raft: freeAddr(t)}
		_, port, _ := net.SplitHostPort(n.api)
		n.name = n.id + ".leasehold.test:" + port
		nodes[i] = n
		peers = append(peers, n.id+"="+n.raft)
	}
	for i, n := range nodes {
		env := childEnv()
		if i == 0 {
			env = append(env, "LEASEHOLD_ALLOW_HOST=ops.leasehold.test")
		}
		p := startProc(t, dir, "serve-"+n.id, env, "serve", "--node-id", n.id, "--data-dir", filepath.Join(dir, n.id),
			"--api-addr", n.api, "--raft-addr", n.raft, "--advertise-api", "http://"+n.name, "--peers", strings.Join(peers, ","))
		defer func() {
			if t.Failed() {
				t.Logf("%s stderr:\n%s", n.id, p.Stderr())
			}
		}()
		if i == len(nodes)-1 {
			for _, n := range nodes {
				if err := procs.WaitReady(p, "http://"+n.api, readyTimeout); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// A follower: /readyz names the leader.
	res, err := http.Get("http://" + nodes[0].api + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	ready, _ := io.ReadAll(res.Body)
	res.Body.Close()
	follower := nodes[0]
	if strings.HasPrefix(string(ready), "ready: leader n1 ") {
		follower = nodes[1]
	}

	// By its name, the follower forwards an acquire to the leader (whose
	// Host is then the leader's raft address).
	if status, body := hostCall(t, follower.api, follower.name, "/leasehold.v1.Leases/Acquire",
		`{"resources":["jobs/by-name"],"ttl":"60s","owner":"curl"}`); status != http.StatusOK || !strings.Contains(body, `"token"`) {
		t.Fatalf("acquire through follower %s by its name: HTTP %d %s", follower.id, status, body)
	}

	// The Go client knows only the follower's name and reaches the leader by
	// the name the leader advertises.
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !strings.Contains(addr, ".leasehold.test:") {
			return nil, fmt.Errorf("the test resolves only *.leasehold.test, not %s", addr)
		}
		_, port, _ := net.SplitHostPort(addr)
		return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+port)
	}}
	defer tr.CloseIdleConnections()
	c, err := client.New(client.Config{Endpoints: []string{"http://" + follower.name}, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	for i := range 3 {
		l, err := c.Acquire(ctx, fmt.Sprintf("jobs/go-%d", i), client.TTL(time.Minute), client.ManualRenew())
		if err != nil {
			t.Fatalf("Go client by names, acquire %d: %v", i, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Go client by names, release %d: %v", i, err)
		}
	}

	// The CLI by address, through the follower.
	if r := lhEnv(t, childEnv(), "--endpoints", "http://"+follower.api, "acquire", "jobs/cli", "--ttl", "60s"); r.code != 0 {
		t.Fatalf("CLI acquire through the follower: %s", r)
	}

	// Names no node was given; and the one n1 was given.
	_, port, _ := net.SplitHostPort(nodes[0].api)
	for _, c := range []struct {
		node       named
		host, want string
		status     int
	}{
		{follower, "evil.example:" + port, "--allow-host evil.example", http.StatusMisdirectedRequest},
		{nodes[1], nodes[0].name, "--allow-host n1.leasehold.test", http.StatusMisdirectedRequest}, // another node's name
		{nodes[1], "ops.leasehold.test", "--allow-host ops.leasehold.test", http.StatusMisdirectedRequest},
		{nodes[0], "ops.leasehold.test:" + port, "", http.StatusOK},
	} {
		status, body := hostCall(t, c.node.api, c.host, "/leasehold.v1.Leases/List", `{}`)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s by the name %s: HTTP %d %.300s, want %d %q", c.node.id, c.host, status, body, c.status, c.want)
		}
	}
}
