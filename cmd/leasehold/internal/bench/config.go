// Package bench is the workload generator behind `leasehold bench`: it
// drives a leasehold node through the Go client with the lock, renew and
// contend workloads, keeps latency histograms per operation, and renders the
// result as a table, JSON or a plot. The command only parses flags.
package bench

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// Workload names.
const (
	Lock    = "lock"    // acquire+release pairs on random resources
	Renew   = "renew"   // many held leases renewed at TTL/3
	Contend = "contend" // every client queues for one resource
	Queue   = "queue"   // producers send to a keyed queue, consumers receive and ack
)

// Config describes one benchmark run.
type Config struct {
	// Endpoints are the node URLs the clients talk to.
	Endpoints []string
	// ClientConfig, if set, gives the clients' configuration (with
	// credentials and TLS). By default a plain client of Endpoints that
	// logs nothing.
	ClientConfig func() (client.Config, error)
	// Shared makes the workers of lock and contend share one client, as
	// the goroutines of one process would: their concurrent calls go
	// together in batch requests. Otherwise each worker has its own
	// client, as separate processes would.
	Shared bool
	// MaxBatch is the clients' MaxBatch (0: the client's default).
	MaxBatch int
	// Session is the clients' Session mode (the client's default if 0).
	Session client.SessionMode
	// Target describes the endpoints in the report (e.g. "embedded node").
	Target string

	Workload  string
	Clients   int // workers (lock, contend), renewal pool size (renew), producers and as many consumers (queue)
	Resources int // lock: resources chosen at random; queue: message keys
	// Batch is the messages of one send and the most of one receive
	// (queue; 1: no batches).
	Batch int
	// BodyBytes is each message's size (queue; default 200).
	BodyBytes int
	Leases    int // renew: leases held
	// LeasePrefix names the renew workload's leases: LeasePrefix/0,
	// LeasePrefix/1, ... (default bench/renew); runs that hold leases at
	// once need their own.
	LeasePrefix string
	Hold        time.Duration
	// TTL of every lease; 0 means 30s for renew and 15s otherwise.
	TTL time.Duration
	// Wait bounds how long an acquire queues behind a holder (lock,
	// contend).
	Wait time.Duration

	// Duration is how long to measure after warm-up; Ops, if positive,
	// ends the measurement after that many measured operations instead
	// (pairs, grants or renewals).
	Duration time.Duration
	Ops      int64
	Warmup   time.Duration

	// NoCompression keeps the default clients from advertising gzip, so
	// that the node answers uncompressed (to measure what compressing
	// small responses costs).
	NoCompression bool

	// LogIndex, if set, reads the node's commit index (an embedded node),
	// so that the report can say how many log entries the measured
	// operations took.
	LogIndex func() uint64

	// Cleanup releases the leases still held when a renew run ends (when
	// not interrupted); without it they lapse at their TTL.
	Cleanup bool

	// Seed makes the choice of resources reproducible (0: 1).
	Seed uint64

	// Progress, if not nil, receives a one-line progress bar (it should be
	// a terminal).
	Progress io.Writer
}

const (
	defaultTTL      = leasehold.DefaultTTL
	defaultRenewTTL = 30 * time.Second
	// drainTimeout is how long operations in flight when the measurement
	// ends may take to finish before they are canceled.
	drainTimeout = 5 * time.Second
)

func (c *Config) setDefaults() {
	if c.TTL == 0 {
		c.TTL = defaultTTL
		if c.Workload == Renew {
			c.TTL = defaultRenewTTL
		}
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.LeasePrefix == "" {
		c.LeasePrefix = "bench/renew"
	}
	if c.Workload == Queue {
		c.Batch = max(c.Batch, 1)
		if c.BodyBytes == 0 {
			c.BodyBytes = 200
		}
	}
	if c.Target == "" && len(c.Endpoints) > 0 {
		c.Target = fmt.Sprint(c.Endpoints)
	}
}

// Validate reports the first unusable setting.
func (c *Config) Validate() error {
	switch {
	case len(c.Endpoints) == 0:
		return errors.New("bench: no endpoints")
	case c.Workload != Lock && c.Workload != Renew && c.Workload != Contend && c.Workload != Queue:
		return fmt.Errorf("bench: workload %q: use lock, renew, contend or queue", c.Workload)
	case c.Clients < 1:
		return fmt.Errorf("bench: clients is %d; it must be at least 1", c.Clients)
	case c.Workload == Queue && (c.Batch < 0 || c.Batch > leasehold.MaxQueueBatch):
		return fmt.Errorf("bench: batch is %d; it must be 1 to %d", c.Batch, leasehold.MaxQueueBatch)
	case c.Workload == Queue && (c.BodyBytes < 16 && c.BodyBytes != 0 || c.BodyBytes > 1<<20):
		return fmt.Errorf("bench: body bytes is %d; it must be 16 (a send time and a run id) to 1 MiB", c.BodyBytes)
	case (c.Workload == Lock || c.Workload == Queue) && c.Resources < 1:
		return fmt.Errorf("bench: resources is %d; it must be at least 1", c.Resources)
	case c.Workload == Renew && c.Leases < 1:
		return fmt.Errorf("bench: leases is %d; it must be at least 1", c.Leases)
	case c.Hold < 0 || c.Wait < 0 || c.Warmup < 0 || c.TTL < 0 || c.Ops < 0:
		return errors.New("bench: hold, wait, warmup, ttl and ops must not be negative")
	case c.Duration <= 0 && c.Ops == 0:
		return errors.New("bench: give a positive duration or a number of ops")
	case c.Workload == Renew && c.TTL != 0 && c.TTL < 300*time.Millisecond:
		return fmt.Errorf("bench: ttl %v is too short to renew at ttl/3", c.TTL)
	}
	return nil
}
