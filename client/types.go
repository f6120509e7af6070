package client

import (
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// The results of the client's inspection, operator and cluster calls, in
// plain Go types: callers never need the generated API. Wall-clock times
// are the leader's, for display only; a zero time.Time or duration means
// the server did not say.

// LeaseInfo is what anyone may see about a lease (never its secret).
type LeaseInfo struct {
	leasehold.Lease
	// ExpiresIn is the time left on the leader's clock, valid only if
	// ExpiresKnown (the answering node may not know it).
	ExpiresIn    time.Duration
	ExpiresKnown bool
}

// Waiter is a queued acquire.
type Waiter struct {
	Resources []string
	Owner     string
	Operation string
	Wait      time.Duration // how long it is willing to wait in all
	QueuedAt  time.Time
	// Waiting is how long it has waited so far (only Locks reports it).
	Waiting time.Duration
}

// ResourceInfo is what Get reports about a resource.
type ResourceInfo struct {
	Resource string
	Holder   *LeaseInfo // nil if the resource is free
	Waiters  []Waiter   // in the order they will be served
	// LockDelay is set, to the lock-delay of the lease that expired, while
	// the resource is blocked after an expiry; 0 otherwise.
	LockDelay time.Duration
	// Limit and Slots are set for a semaphore in use: its limit and the
	// leases holding its slots (Holder is then nil).
	Limit int
	Slots []LeaseInfo
}

// LockInfo is one resource as operators see it (Locks).
type LockInfo struct {
	Resource string
	// Holder is the lease holding Resource, with its Resources, Owner,
	// Token..., or nil if the resource is free.
	Holder *LeaseInfo
	// HeldFor is the lease's age on the leader's clock.
	HeldFor time.Duration
	// Waiters counts the queued acquires; OldestWait is how long the
	// first has waited.
	Waiters    int
	OldestWait time.Duration
	// RenewalOverdue: no renewal for over half the TTL.
	RenewalOverdue bool
	// ProgressStale: the last progress note is older than 3 TTLs.
	ProgressStale bool
	// LockDelay and WaiterList are set only for Locks with a Resource.
	LockDelay  time.Duration
	WaiterList []Waiter
}

// AuditRecord is one operator action in the replicated audit log.
type AuditRecord struct {
	Index     uint64 // the raft index that recorded it
	Time      time.Time
	Actor     string // who: the caller's identity
	Action    string // such as "force-release"
	Resource  string
	LeaseID   uint64
	Token     uint64
	Owner     string
	Operation string
	Reason    string
}

// Member is a server in the raft configuration.
type Member struct {
	ID       string
	RaftAddr string
	Voter    bool
	Leader   bool
}

// NodeStatus is one member's raft state (ClusterStatus).
type NodeStatus struct {
	ID           string
	RaftAddr     string
	State        string // Leader, Follower, Candidate, or unreachable
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastIndex    uint64
	LeaderID     string
	LastContact  time.Duration
	// Error says why the node could not be asked (State is then
	// "unreachable" and the raft fields are empty).
	Error string
}

// Page is one page of held leases (List).
type Page struct {
	Leases []LeaseInfo
	// NextPageToken asks for the next page; empty on the last one.
	NextPageToken string
}
