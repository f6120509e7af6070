package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// servers is one running cluster (etcd or leasehold) of 1 or 3 nodes on
// loopback, each node a child process with its data in dir.
type servers struct {
	name      string
	endpoints []string // client URLs, one per node
	procs     []*exec.Cmd
}

// startEtcd starts an etcd cluster of n members. etcd fsyncs its WAL by
// default; nothing here turns that off.
func startEtcd(bin, dir string, n int) (*servers, error) {
	clientPorts, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	peerPorts, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("e%d=http://127.0.0.1:%d", i+1, peerPorts[i]))
	}
	s := &servers{name: fmt.Sprintf("etcd, %d node(s)", n)}
	for i := range n {
		name := fmt.Sprintf("e%d", i+1)
		client := fmt.Sprintf("http://127.0.0.1:%d", clientPorts[i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", peerPorts[i])
		err := s.start(dir, name, bin,
			"--name", name, "--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "peers-bench", "--logger", "zap", "--log-level", "warn")
		if err != nil {
			s.stop()
			return nil, err
		}
		s.endpoints = append(s.endpoints, client)
	}
	return s, s.waitReady("/health")
}

// startLeasehold starts leasehold nodes as `leasehold serve` runs them
// (raft-wal log, fsync on), without the per-client acquire rate limit,
// which would cap a benchmark rather than describe the node.
func startLeasehold(bin, dir string, n int) (*servers, error) {
	apiPorts, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	raftPorts, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	var peers []string
	for i := range n {
		peers = append(peers, fmt.Sprintf("n%d=127.0.0.1:%d", i+1, raftPorts[i]))
	}
	s := &servers{name: fmt.Sprintf("leasehold, %d node(s)", n)}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		args := []string{"serve", "--node-id", name, "--data-dir", filepath.Join(dir, name),
			"--api-addr", fmt.Sprintf("127.0.0.1:%d", apiPorts[i]),
			"--raft-addr", fmt.Sprintf("127.0.0.1:%d", raftPorts[i]),
			"--acquire-rate", "0", "--log-level", "warn"}
		if n > 1 {
			args = append(args, "--peers", strings.Join(peers, ","))
		}
		if err := s.start(dir, name, bin, args...); err != nil {
			s.stop()
			return nil, err
		}
		s.endpoints = append(s.endpoints, fmt.Sprintf("http://127.0.0.1:%d", apiPorts[i]))
	}
	return s, s.waitReady("/readyz")
}

func (s *servers) start(dir, name, bin string, args ...string) error {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the benchmark
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	logf.Close() // the child has its own descriptor
	s.procs = append(s.procs, cmd)
	return nil
}

// waitReady polls every node's health path until all answer 200, for at
// most 30 s.
func (s *servers) waitReady(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ep := range s.endpoints {
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ep+path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-ctx.Done():
				s.stop()
				return fmt.Errorf("%s: %s did not become ready within 30s (see its log in the work dir)", s.name, ep)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// stop ends every node: SIGTERM, then SIGKILL after 5 s.
func (s *servers) stop() {
	for _, p := range s.procs {
		p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range s.procs {
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
	s.procs = nil
}

// freePorts returns n distinct free loopback ports, held open together so
// that none is handed out twice.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
