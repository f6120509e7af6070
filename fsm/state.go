// Package fsm is leasehold's deterministic state machine: leases and their
// waiters and lock-delays, semaphores, elections, the fenced key-value
// space and its transactions, idempotency keys, keyed queues, partition
// groups and barriers, with the audit log and request deduplication. Each
// command has one row in the command table (registry.go); every change is
// reported as an event (events.go) and every deadline as a countdown for
// the leader to keep (countdown.go). It reads no clock, makes no random
// choice and does no I/O; time, ids and secret hashes arrive inside
// commands. Replaying the same log gives the same state, byte for byte.
// The vocabulary the state answers in (leases, items, deliveries,
// groups...) is package leasehold's.
//
// The State is cut into one sub-state per primitive (leaseState,
// semState, electionState, kvState, idemState, queueState, groupState,
// barrierState), each owning its maps, its commands' apply, its snapshot
// sections, its countdowns and its answer type; State itself holds only
// what they share (the token space, the dedup window, the audit log, the
// observer) and hands each command to its sub-state. What a sub-state
// provides is listed in docs/architecture.md ("A sub-state of the state
// machine").
//
// A State is not safe for concurrent use: the caller serialises Apply,
// Capture and Release and guards reads; a capture is then encoded apart
// (capture.go).
package fsm

import (
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// EndReason says why a lease ended.
type EndReason uint8

const (
	EndReleased EndReason = iota + 1
	EndExpired
	EndCanceled // a waiter's grant released because its requester went away
	EndForced   // an operator forced the release
)

func (r EndReason) String() string {
	switch r {
	case EndReleased:
		return "released"
	case EndExpired:
		return "expired"
	case EndCanceled:
		return "canceled"
	case EndForced:
		return "forced"
	}
	return "unknown"
}

// Observer hears about every change as it is applied, in log order. The
// node uses it for metrics and to wake waiting requests (its leader
// timers hear of countdowns: Countdowns). Calls happen inside Apply, so
// they must be quick and must not call back into State.
//
// A waiting acquire is named by its key (Acquire.Key), which the node
// treats as an opaque string.
type Observer interface {
	Granted(l *leasehold.Lease, key string)
	Renewed(l *leasehold.Lease, remaining time.Duration)
	Ended(l *leasehold.Lease, why EndReason)
	WaitEnded(key string, r Result)
}

// Result is the answer to one command: an error, or what the command did.
// The fields are the ones every lease-backed primitive answers with;
// anything a primitive answers beyond them is its own type, in Answer
// (read through the primitive's accessor: Result.Queue, Result.Idem,
// Result.Group, Result.Txn, Result.Version, Result.Barrier).
type Result struct {
	Err       error            // a *leasehold.Error
	Lease     *leasehold.Lease // the lease granted, renewed or released
	Queued    bool             // the acquire waits; WaitEnded brings the outcome
	Remaining time.Duration    // renew and acquire: how long the lease now runs
	Dup       bool             // answered from the dedup window
	// ForeignSecret marks a retried acquire whose secret differs from the
	// first request's (or can no longer be checked): the caller does not
	// know the lease's secret, so the answer must not claim it does.
	ForeignSecret bool
	// Answer is the primitive's own answer (*QueueResult, *Idem,
	// *GroupInfo, *KVResult, *BarrierResult), or nil.
	Answer Answer
}

// An Answer is what a primitive answers beyond a Result's common fields.
// Each primitive defines its own type, in its own file, with an accessor
// on Result.
type Answer interface{ answer() }

// Config bounds the state machine's memory. Every node must use the same
// values, since they change what Apply does.
type Config struct {
	DedupWindow time.Duration // how long a request ID is remembered
	DedupMax    int           // most request IDs remembered at once
	AuditMax    int           // most audit records kept (oldest go first)
	// MaxWaitersPerResource refuses an acquire that would queue behind that
	// many others on one resource (0: no limit).
	MaxWaitersPerResource int
	// MaxLeasesPerOwner refuses a grant to an owner already holding that
	// many leases (0: no limit).
	MaxLeasesPerOwner int
	// A transaction may carry at most MaxTxnCompares compares, MaxTxnOps
	// operations per branch and MaxTxnBytes of values in all (0: no limit).
	MaxTxnCompares int
	MaxTxnOps      int
	MaxTxnBytes    int

	// Idempotency keys (idem.go): the retention of a completed result when
	// Begin names none and the most it may name; the largest result; the
	// most keys per prefix and bytes of results in all (0: no limit).
	IdemRetention        time.Duration
	MaxIdemRetention     time.Duration
	MaxIdemResult        int
	MaxIdemKeysPerPrefix int
	MaxIdemBytes         int

	// MaxQueueBytes is the budget for message bodies in all queues (0: no
	// limit); a Send past it is refused, never an accepted message dropped.
	MaxQueueBytes int
	// MaxQueueDedupIDs bounds the dedup ids one queue remembers within
	// its window (0: no limit).
	MaxQueueDedupIDs int
}

// DefaultConfig is what a node uses unless told otherwise.
func DefaultConfig() Config {
	return Config{DedupWindow: 5 * time.Minute, DedupMax: 1 << 20, AuditMax: 10000,
		MaxWaitersPerResource: 1000, MaxLeasesPerOwner: 100000,
		MaxTxnCompares: leasehold.MaxTxnCompares, MaxTxnOps: leasehold.MaxTxnOps, MaxTxnBytes: leasehold.MaxTxnBytes,
		IdemRetention: 24 * time.Hour, MaxIdemRetention: 7 * 24 * time.Hour, MaxIdemResult: 64 << 10,
		MaxIdemKeysPerPrefix: 1 << 20, MaxIdemBytes: 1 << 30, MaxQueueBytes: 1 << 30, MaxQueueDedupIDs: 1 << 20}
}

// State is the whole replicated state: what the primitives share, and one
// sub-state per primitive.
type State struct {
	cfg   Config
	hooks hooks
	// The entry being applied: its index and the leader's wall clock.
	lastIndex uint64
	now       int64
	// lastToken is the token space: the largest fencing token ever issued
	// (nextToken). Every primitive's tokens come from it.
	lastToken uint64
	dedup     dedup         // the answers of requests with an ID (dedup.go)
	audit     []AuditRecord // what operators forced (admin.go)

	leases    leaseState    // leases, waiters, lock-delays (leases.go)
	sems      semState      // semaphores (semaphore.go)
	elections electionState // elections (elections.go)
	kv        kvState       // the fenced key-value space (kv.go)
	idem      idemState     // idempotency keys (idem.go)
	queues    queueState    // keyed queues (queue.go)
	groups    groupState    // partition groups (groups.go)
	barriers  barrierState  // barriers and latches (barrier.go)

	snaps   snapshots // captures out, and the last snapshot's size (capture.go); not state
	scratch encoder   // a buffer for fingerprints (request.go); not state
}

// hooks are who hears, inside Apply, what it does.
type hooks struct {
	obs    Observer
	sink   EventSink  // obs, if it wants events (events.go); else nil
	timers Countdowns // obs, if it times countdowns (countdown.go); else nil
}

// New returns an empty state. obs may be nil.
func New(cfg Config, obs Observer) *State {
	s := &State{cfg: cfg, dedup: newDedup()}
	for _, p := range s.parts() {
		p.init(s)
	}
	s.track(&s.dedup.recs)
	s.SetObserver(obs)
	return s
}

// SetObserver replaces the observer (after a restore, for instance).
func (s *State) SetObserver(obs Observer) {
	if obs == nil {
		obs = nopObserver{}
	}
	s.hooks.obs = obs
	s.hooks.sink, _ = obs.(EventSink)
	s.hooks.timers, _ = obs.(Countdowns)
}

// LastIndex is the log index of the last applied entry.
func (s *State) LastIndex() uint64 { return s.lastIndex }

// LastToken is the largest fencing token ever issued.
func (s *State) LastToken() uint64 { return s.lastToken }

// Apply applies one log entry and returns one result per command. Each
// command applies itself to its sub-state (Command.apply, found by its
// kind in the table of commands when the entry was decoded).
func (s *State) Apply(index uint64, b *Batch) []Result {
	s.thaw()
	s.lastIndex, s.now = index, b.Time
	s.dedup.evict(b.Time, s.cfg)
	out := make([]Result, len(b.Cmds))
	for i, c := range b.Cmds {
		out[i] = c.apply(s, index, b.Time)
		s.elections.afterCommand()
	}
	return out
}

// nextToken makes the fencing token for a grant in the entry at index ix:
// the index itself, or one past the last token if a grant earlier in the
// same entry took it. Tokens strictly increase across the whole log.
func (s *State) nextToken(ix uint64) uint64 {
	t := max(ix, s.lastToken+1)
	s.lastToken = t
	return t
}

func validateRequestID(id string) error {
	return leasehold.ValidateName("request_id", id, leasehold.MaxRequestIDLen, false)
}

type nopObserver struct{}

func (nopObserver) Granted(*leasehold.Lease, string)        {}
func (nopObserver) Renewed(*leasehold.Lease, time.Duration) {}
func (nopObserver) Ended(*leasehold.Lease, EndReason)       {}
func (nopObserver) WaitEnded(string, Result)                {}

// snapshots is the state's account of its captures (capture.go).
type snapshots struct {
	// capture is the snapshot that holds the maps frozen, if any, and
	// out the count of captures not yet released.
	capture *capture
	out     atomic.Int32
	// size is the last snapshot's size, to size the next one's buffer.
	size atomic.Int64
	// maps are every sub-state's cowMaps (State.track).
	maps []cowMapper
}
