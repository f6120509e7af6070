package torture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/freeport"
	"github.com/leasehold/leasehold/internal/netfault"
)

// localCluster is N `leasehold serve` processes that torture started
// itself (bin is this very binary), each with its data dir and log under
// dir, on loopback ports.
type localCluster struct {
	bin, dir string
	nodes    []*localNode
	status   *client.Client
	lab      *netfault.Lab // nodes in network namespaces, links through proxies (nil: plain loopback)
}

// localNode is one serve process: restartable with the same flags.
type localNode struct {
	ID, URL  string
	RaftAddr string
	args     []string
	rate     float64        // clock rate (1: real time)
	host     *netfault.Host // its network namespace, if in a lab

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
}

// startLocal starts n nodes bootstrapped as one cluster and waits until a
// leader serves. rates, if not empty, gives each node's clock rate (see
// serve's hidden --test-clock-rate). With partitions, each node runs in a
// network namespace of its own and every link between two nodes passes
// through a netfault proxy (this needs root); the API stays reachable
// from here, as for a client beside every node.
func startLocal(ctx context.Context, bin string, n int, rates []float64, partitions bool) (*localCluster, error) {
	dir, err := os.MkdirTemp("", "leasehold-torture-")
	if err != nil {
		return nil, err
	}
	c := &localCluster{bin: bin, dir: dir}
	if partitions {
		if c.lab, err = netfault.NewNetnsLab(n, []string{"api", "raft"}, uint64(time.Now().UnixNano())); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("the partition faults need network namespaces (run as root, or leave partition out of --faults): %w", err)
		}
	}
	var peers, urls []string
	for i := range n {
		api, raft, err := c.addrs(i)
		if err != nil {
			c.close()
			return nil, err
		}
		nd := &localNode{ID: fmt.Sprintf("n%d", i+1), URL: "http://" + api, RaftAddr: raft, rate: 1}
		if i < len(rates) {
			nd.rate = rates[i]
		}
		nd.args = append(nd.args, "serve", "--node-id", nd.ID, "--data-dir", filepath.Join(dir, nd.ID),
			"--api-addr", api, "--raft-addr", raft, "--log-level", "warn", "--dashboard=false")
		if c.lab != nil {
			nd.host = c.lab.Hosts[i]
			// Its addresses are the namespace's own, not loopback ones.
			nd.args = append(nd.args, "--insecure")
		}
		if nd.rate != 1 {
			nd.args = append(nd.args, "--test-clock-rate", strconv.FormatFloat(nd.rate, 'f', -1, 64))
		}
		peers = append(peers, nd.ID+"="+raft)
		urls = append(urls, nd.URL)
		c.nodes = append(c.nodes, nd)
	}
	for _, nd := range c.nodes {
		nd.args = append(nd.args, "--peers", strings.Join(peers, ","))
		if err := c.start(nd); err != nil {
			c.close()
			return nil, err
		}
	}
	c.status, err = client.New(client.Config{Endpoints: urls, Session: client.SessionOff, RequestTimeout: 2 * time.Second})
	if err != nil {
		c.close()
		return nil, err
	}
	for _, nd := range c.nodes {
		if err := c.waitReady(ctx, nd, time.Minute); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

// addrs are node i's API and raft addresses: its namespace's, or free
// loopback ports.
func (c *localCluster) addrs(i int) (api, raft string, err error) {
	if c.lab != nil {
		h := c.lab.Hosts[i]
		return h.Listen("api"), h.Listen("raft"), nil
	}
	if api, err = freeport.Addr(); err != nil {
		return "", "", err
	}
	raft, err = freeport.Addr()
	return api, raft, err
}

// URLs are the nodes' API URLs.
func (c *localCluster) URLs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.URL)
	}
	return out
}

// start runs nd's serve process, its output appended to dir/ID.log.
func (c *localCluster) start(nd *localNode) error {
	log, err := os.OpenFile(filepath.Join(c.dir, nd.ID+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	name, args := c.bin, nd.args
	if nd.host != nil {
		name, args = nd.host.Command(c.bin, nd.args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = childEnv()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", nd.ID, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	nd.mu.Lock()
	nd.cmd, nd.done, nd.paused = cmd, done, false
	nd.mu.Unlock()
	return nil
}

// childEnv is this process's environment without LEASEHOLD_ variables (a
// node takes every flag from one), so the nodes get only their flags.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASEHOLD_") {
			env = append(env, kv)
		}
	}
	return env
}

func (nd *localNode) running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.done == nil {
		return false
	}
	select {
	case <-nd.done:
		return false
	default:
		return true
	}
}

// signal sends sig to nd's process (if it runs).
func (nd *localNode) signal(sig syscall.Signal) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil || nd.cmd.Process == nil {
		return fmt.Errorf("%s is not running", nd.ID)
	}
	switch sig {
	case syscall.SIGSTOP:
		nd.paused = true
	case syscall.SIGCONT:
		nd.paused = false
	}
	return nd.cmd.Process.Signal(sig)
}

// kill SIGKILLs nd (waking it first, if stopped) and waits until it is
// reaped.
func (nd *localNode) kill() error {
	if !nd.running() {
		return nil
	}
	nd.signal(syscall.SIGCONT)
	nd.signal(syscall.SIGKILL)
	nd.mu.Lock()
	done := nd.done
	nd.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s not reaped 10s after SIGKILL", nd.ID)
	}
}

// restart starts a killed node again with its flags and waits until it
// answers /readyz.
func (c *localCluster) restart(ctx context.Context, nd *localNode) error {
	if err := c.start(nd); err != nil {
		return err
	}
	return c.waitReady(ctx, nd, time.Minute)
}

var probe = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// waitReady polls nd's /readyz until it answers 200.
func (c *localCluster) waitReady(ctx context.Context, nd *localNode, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if !nd.running() {
			return fmt.Errorf("%s exited before it was ready: %s", nd.ID, c.logTail(nd))
		}
		resp, err := probe.Get(nd.URL + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v: %v", nd.ID, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leader is the node that says it leads (nil if none does yet).
func (c *localCluster) leader(ctx context.Context) *localNode {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	sts, err := c.status.ClusterStatus(ctx)
	if err != nil {
		return nil
	}
	for _, st := range sts {
		if st.State == "Leader" {
			return c.node(st.ID)
		}
	}
	return nil
}

// waitLeader waits up to timeout for a leader that is not paused.
func (c *localCluster) waitLeader(ctx context.Context, timeout time.Duration) (*localNode, error) {
	deadline := time.Now().Add(timeout)
	for {
		if l := c.leader(ctx); l != nil && l.running() && !l.isPaused() {
			return l, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("no leader within %v", timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (nd *localNode) isPaused() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.paused
}

func (c *localCluster) node(id string) *localNode {
	for _, nd := range c.nodes {
		if nd.ID == id {
			return nd
		}
	}
	return nil
}

// logTail is the end of a node's log, to say why it stopped.
func (c *localCluster) logTail(nd *localNode) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, nd.ID+".log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}

// close kills every node and removes the data.
func (c *localCluster) close() {
	for _, nd := range c.nodes {
		nd.kill()
	}
	if c.status != nil {
		c.status.Close()
	}
	if c.lab != nil {
		c.lab.Close()
	}
	os.RemoveAll(c.dir)
}

const sigcont = syscall.SIGCONT
