// Package cluster runs leasehold's state machine under hashicorp/raft: a
// durable fsync'd log (raft-wal), file snapshots, a TCP transport, batching
// of concurrent proposals into one log entry, and the leader's timers that
// propose expiries. One node is a cluster of one voter; more voters are a
// matter of configuration.
package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

// History hears what the state machine applies, for a node's watch
// history. Calls are made while the state is locked: keep them quick and
// do not call into the node.
type History interface {
	fsm.EventSink // each change, in apply order
	// Applied follows the events of the entry at index (if any).
	Applied(index uint64)
	// Restored says a snapshot at index replaced the state: the events
	// before it will not be reported.
	Restored(index uint64)
}

// Peer is one voter of the initial cluster.
type Peer struct {
	ID   string
	Addr string // host:port of its raft transport
}

// Config is everything a node needs. Start from DefaultConfig.
type Config struct {
	NodeID   string
	DataDir  string
	RaftAddr string // bind address of the raft transport (host:port)
	// Advertise is the address other nodes dial; defaults to RaftAddr.
	Advertise string
	// RaftListener, if set, is the already-bound listener for raft and
	// forwarded traffic (the node closes it); RaftAddr should name its
	// address, so that a restart listens there again. Tests bind port 0.
	RaftListener net.Listener
	// Peers is the initial voter set used to bootstrap a new cluster. Empty
	// means a cluster of this node alone (unless Join is set).
	Peers []Peer
	// Join makes a new node wait to be added to a running cluster instead of
	// bootstrapping one.
	Join bool
	// Dial opens connections to other nodes; tests replace it to cut links.
	Dial Dialer
	// TLS, if set, secures raft and forwarded traffic between nodes. It is
	// used both to listen and to dial, so it must hold this node's
	// certificate (for server and client auth), RootCAs and ClientCAs with
	// ClientAuth = RequireAndVerifyClientCert.
	TLS *tls.Config

	Clock  clock.Clock
	Logger *slog.Logger
	FSM    fsm.Config

	// MaxBatch is the most commands merged into one log entry.
	MaxBatch int
	// MaxInflight is how many log entries may await commit at once.
	MaxInflight int
	// QueueLinger is how long an acquire that will wait in line may wait
	// for another proposal's entry to ride in before it starts its own
	// (see Node.ProposeBehind; 0: never waits).
	QueueLinger time.Duration
	// ApplyTimeout bounds how long a proposal waits to enter the log.
	ApplyTimeout time.Duration
	// CommitLatency, if set, hears how long each log entry took from being
	// handed to raft until it was applied (or failed), for metrics. It is
	// called from the goroutine awaiting the commit: keep it quick.
	CommitLatency func(time.Duration)
	// TracerProvider, if set, traces each proposal from its submission to
	// its apply (a "raft commit" span in the proposer's trace). Nil: no
	// spans.
	TracerProvider trace.TracerProvider
	// History, if set, hears every change event this node applies, in log
	// order, and each snapshot that replaces the state: the node's watch
	// history (service.Hub).
	History History

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	SnapshotInterval   time.Duration
	SnapshotThreshold  uint64
	TrailingLogs       uint64
	// WALSegmentSize is the size of one log segment file. Compacted entries
	// are dropped a whole segment at a time, so a lagging node can be sent
	// old entries until their segment goes (then it gets a snapshot). Each
	// segment file is preallocated in full, so a node needs this much free
	// space to start (0: raft-wal's default, 64 MiB).
	WALSegmentSize int
}

// DefaultConfig is a single embedded node's configuration.
func DefaultConfig() Config {
	return Config{
		NodeID:             "n1",
		DataDir:            "leasehold-data",
		RaftAddr:           "127.0.0.1:7421",
		Clock:              clock.Real{},
		Logger:             slog.Default(),
		FSM:                fsm.DefaultConfig(),
		MaxBatch:           512,
		MaxInflight:        2,
		QueueLinger:        2 * time.Millisecond,
		ApplyTimeout:       5 * time.Second,
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond,
		SnapshotInterval:   30 * time.Second,
		SnapshotThreshold:  8192,
		TrailingLogs:       10240,
		WALSegmentSize:     64 << 20,
	}
}

// Validate reports the first unusable setting.
func (c *Config) Validate() error {
	switch {
	case c.NodeID == "":
		return errors.New("cluster: node id must not be empty")
	case c.DataDir == "":
		return errors.New("cluster: data dir must not be empty")
	case c.RaftAddr == "":
		return errors.New("cluster: raft address must not be empty")
	case c.Clock == nil:
		return errors.New("cluster: clock must be set")
	case c.Logger == nil:
		return errors.New("cluster: logger must be set")
	case c.MaxBatch < 1 || c.MaxInflight < 1:
		return fmt.Errorf("cluster: max batch (%d) and max inflight (%d) must be positive", c.MaxBatch, c.MaxInflight)
	case c.ApplyTimeout <= 0:
		return errors.New("cluster: apply timeout must be positive")
	case c.WALSegmentSize < 0 || c.WALSegmentSize > 1<<30:
		return fmt.Errorf("cluster: WAL segment size %d bytes: give 0 (the default) up to 1 GiB", c.WALSegmentSize)
	case c.TrailingLogs < 1:
		// Compaction must keep at least the entry at the snapshot index:
		// a follower checks the entry before each append against it.
		return errors.New("cluster: trailing logs must be at least 1")
	}
	self := false
	for _, p := range c.Peers {
		if p.ID == "" || p.Addr == "" {
			return fmt.Errorf("cluster: peer %q has an empty id or address", p.ID+"="+p.Addr)
		}
		self = self || p.ID == c.NodeID
	}
	if len(c.Peers) > 0 && !self {
		return fmt.Errorf("cluster: node id %q is not among the peers", c.NodeID)
	}
	if len(c.Peers) > 0 && c.Join {
		return errors.New("cluster: give either peers (to bootstrap a new cluster) or join, not both")
	}
	return nil
}
