package integration

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// Raft and forwarded traffic run over mutual TLS: the cluster works, and a
// node whose certificate comes from another CA cannot join.
func TestRaftMutualTLS(t *testing.T) {
	certs := testcluster.NewCerts(t)
	c := testcluster.Start(t, 3, func(cfg *cluster.Config) { cfg.TLS = certs.PeerTLS() })
	leader := c.WaitLeader(10 * time.Second)
	follower := (leader + 1) % 3
	cl, err := client.New(client.Config{Endpoints: []string{c.URL(follower)}, Logger: testcluster.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cl.Acquire(ctx, "tls", client.ManualRenew()); err != nil {
		t.Fatalf("acquire forwarded over TLS: %v", err)
	}

	// An intruder with a certificate from another CA.
	other := testcluster.NewCerts(t)
	i := c.AddNode()
	c.StartWith(i, func(cfg *cluster.Config) { cfg.Join = true; cfg.Peers = nil; cfg.TLS = other.PeerTLS() })
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	defer acancel()
	err = cl.AddVoter(actx, c.ID(i), c.RaftAddr(i))
	if err == nil {
		// The configuration may accept the entry, but the intruder must not
		// be able to replicate: it never learns the log.
		time.Sleep(time.Second)
		if st := c.Node(i).Cluster.LocalStatus(); st.AppliedIndex > 0 {
			t.Fatalf("a node with a foreign certificate applied index %d", st.AppliedIndex)
		}
		return
	}
}
