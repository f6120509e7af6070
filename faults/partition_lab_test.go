package faults

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	hist "github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/internal/netfault"
	"github.com/leasehold/leasehold/internal/procs"
)

// partitionCluster is three `leasehold serve` processes, each on a host
// of a netfault lab (its own network namespace, or loopback without root),
// every raft, forwarding and API connection between hosts passing through
// the proxy of its link.
type partitionCluster struct {
	lab   *netfault.Lab
	nodes []*procs.ServeNode
	// observer reaches every node directly (from the root namespace, or
	// loopback without proxies), even while they are cut from each other:
	// it finds leaders and reads the state back; it is not a client under
	// test.
	observer *client.Client
}

// newLab makes the netns lab, or, where this machine cannot (no root),
// the loopback lab with a loud note; under CI=true (CI runs as root) a
// missing capability fails the test rather than run the weaker lab.
func newLab(t *testing.T, hosts int, services ...string) *netfault.Lab {
	t.Helper()
	lab, err := netfault.NewLab(hosts, services, uint64(time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Error(err)
		}
	})
	if lab.Fallback != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must run the partition tests in network namespaces: %v", lab.Fallback)
		}
		t.Logf("NOTE: no network namespaces here (%v): the partition scenarios run on loopback, "+
			"each link through its proxy; forwarding to the leader goes to its advertised address directly", lab.Fallback)
	}
	t.Logf("lab: %v", lab)
	return lab
}

func startPartitionCluster(t *testing.T) *partitionCluster {
	t.Helper()
	lab := newLab(t, 3, "api", "raft")
	var specs []procs.NodeSpec
	var direct []string
	for _, h := range lab.Hosts {
		var peers []string
		for _, to := range lab.Hosts {
			peers = append(peers, to.Name+"="+h.Reach(to, "raft"))
		}
		s := procs.NodeSpec{ID: h.Name, APIAddr: h.Listen("api"), RaftAddr: h.Listen("raft"),
			Peers: strings.Join(peers, ","), Wrap: h.Command}
		if lab.Mode == "netns" {
			s.Args = []string{"--insecure"} // its own address, not loopback: the lab is the only network it has
		}
		specs = append(specs, s)
		direct = append(direct, "http://"+h.Listen("api"))
	}
	nodes := procs.StartServeNodes(t, lhBin, t.TempDir(), specs)
	return &partitionCluster{lab: lab, nodes: nodes, observer: newClient(t, "", direct...)}
}

// hostClient is a Go client running on host h (its connections opened in
// h's namespace), given every node's URL as h reaches it, its own node
// first. It speaks HTTP/2 without TLS, so that with session (the
// client's default) its lease calls travel on the session stream.
func (pc *partitionCluster) hostClient(t testing.TB, h *netfault.Host, session client.SessionMode) *client.Client {
	t.Helper()
	urls := []string{"http://" + h.Reach(h, "api")}
	for _, to := range pc.lab.Hosts {
		if to != h {
			urls = append(urls, "http://"+h.Reach(to, "api"))
		}
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, DialContext: h.DialContext, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(client.Config{Endpoints: urls, HTTPClient: &http.Client{Transport: tr},
		Logger: slog.New(slog.DiscardHandler), RequestTimeout: partitionRequestTimeout, Session: session})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// partitionRequestTimeout bounds one attempt of a client's call: above
// the slowest round trip of the delayed scenario (a request and its reply
// 300ms each way, a commit's round trip, and a lost chunk's stall).
const partitionRequestTimeout = 3 * time.Second

// host is the lab host of node id.
func (pc *partitionCluster) host(id string) *netfault.Host {
	for _, h := range pc.lab.Hosts {
		if h.Name == id {
			return h
		}
	}
	panic("no host " + id)
}

// leader is the node that leads now, as the observer finds it (the hosts
// are named after their nodes).
func (pc *partitionCluster) leader() (string, error) {
	var id string
	err := checkFor(progressTimeout, func() (err error) {
		id, err = pc.leaderNow()
		return err
	})
	return id, err
}

// leaderNow is the leader one node names now, asked once.
func (pc *partitionCluster) leaderNow() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ms, err := pc.observer.Members(ctx)
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if m.Leader {
			return m.ID, nil
		}
	}
	return "", fmt.Errorf("no leader among %+v", ms)
}

// others are the hosts other than id, by name.
func (pc *partitionCluster) others(id string) []string {
	var hs []string
	for _, h := range pc.lab.Hosts {
		if h.Name != id {
			hs = append(hs, h.Name)
		}
	}
	return hs
}

// healed lifts every cut and the delay, and waits until a leader serves
// writes again.
func (pc *partitionCluster) healed() error {
	pc.lab.Net.Heal()
	if err := pc.lab.Net.Shape(netfault.Faults{}); err != nil {
		return err
	}
	return checkFor(progressTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := pc.observer.Put(ctx, "faults/partition/heal-probe", []byte("x"))
		return err
	})
}

// readBackEverywhere makes each node the leader in turn and reads through
// it every key under prefix: each write h acknowledged must be there on
// every node, with its bytes. It returns the writes missing, per node, as
// violation examples.
func (pc *partitionCluster) readBackEverywhere(t *testing.T, prefix string, h *history) ([]string, error) {
	h.mu.Lock()
	writes := append([]hist.Write(nil), h.writes...)
	h.mu.Unlock()
	var lost []string
	for _, n := range pc.nodes {
		if err := pc.lead(n.ID); err != nil {
			return lost, err
		}
		c := newClient(t, "", n.URL) // the leader answers reads itself
		got := map[string][]byte{}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for e, err := range c.Keys(ctx, prefix) {
			if err != nil {
				cancel()
				return lost, fmt.Errorf("list %s on %s: %w", prefix, n.ID, err)
			}
			got[e.Key] = e.Value
		}
		cancel()
		for _, w := range writes {
			if v, ok := got[w.Key]; !ok || !bytes.Equal(v, w.Value) {
				lost = append(lost, fmt.Sprintf("%s: %s (acknowledged at version %d) is not there", n.ID, w.Key, w.Version))
			}
		}
	}
	return lost, nil
}

// lead moves the leadership to id and waits until it leads.
func (pc *partitionCluster) lead(id string) error {
	return checkFor(progressTimeout, func() error {
		if l, err := pc.leader(); err != nil || l == id {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := pc.observer.TransferLeader(ctx, id)
		if err == nil {
			return fmt.Errorf("transferred to %s, not leading yet", id)
		}
		if leasehold.CodeOf(err) == leasehold.CodeUnavailable {
			return err // an election under way: try again
		}
		return fmt.Errorf("transfer the leadership to %s: %w", id, err)
	})
}
