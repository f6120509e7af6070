package leasehold

import (
	"strconv"
	"time"
)

// The vocabulary of leases, locks and semaphores: their limits, the lease
// anyone may see, a queued acquire and the operators' audit record. The
// API edge, the state machine and the client read them from here.

// Limits of a lease, enforced at the API edge and again in the state
// machine.
const (
	MaxResources     = 64
	MaxResourceLen   = 256
	MaxOwnerLen      = 128
	MaxOperationLen  = 128
	MaxMetadataBytes = 4096
	MaxProgressLen   = 256
	MinTTL           = 100 * time.Millisecond
	MaxTTL           = time.Hour
	MaxWait          = time.Hour
	MaxLockDelay     = time.Hour
	MaxMaxHold       = 7 * 24 * time.Hour
	SecretBytes      = 16 // a lease secret is 128 random bits, hex encoded on the wire
	// DefaultTTL is a lease's TTL when the caller gives none: an acquire's,
	// a campaign's, a group member's session's and an idempotency attempt's,
	// at the edge and in the client and CLI alike.
	DefaultTTL = 15 * time.Second
	// MaxReasonLen bounds an operator's reason (a forced release, a queue's
	// purge or deletion, a group's deletion), which the audit log keeps.
	MaxReasonLen = 512
)

// Lease is what anyone may see about a lease: never its secret.
type Lease struct {
	ID         uint64
	Token      uint64 // fencing token, the same for every resource of the lease
	Resources  []string
	Owner      string
	Operation  string
	TTL        time.Duration
	LockDelay  time.Duration
	MaxHold    time.Duration
	Metadata   map[string]string
	AcquiredAt time.Time // leader's wall clock, for display only
	RenewedAt  time.Time // leader's wall clock, for display only
	RenewCount uint64
	Progress   string
	ProgressAt time.Time // leader's wall clock when Progress was last reported, for display only
	// Semaphore and Limit are set on a semaphore holder's lease: it holds
	// one of the Limit slots of Semaphore, named in Resources[0] (see
	// SlotName); that slot is what its token fences.
	Semaphore string
	Limit     int
}

// MaxSemaphoreLimit bounds a semaphore's limit (its number of slots).
const MaxSemaphoreLimit = 1000

// SlotName names slot i (1..limit) of the semaphore name: "name#i". The
// slot is the resource a holder's token fences.
func SlotName(name string, i int) string { return name + "#" + strconv.Itoa(i) }

// Slot is the slot a semaphore holder's lease holds ("name#i"), or "" for
// a lease that is not a semaphore's.
func (l *Lease) Slot() string {
	if l.Limit == 0 || len(l.Resources) != 1 {
		return ""
	}
	return l.Resources[0]
}

// Waiter is what an operator may see of a queued acquire.
type Waiter struct {
	RequestID string
	Resources []string
	Owner     string
	Operation string
	Wait      time.Duration
	QueuedAt  time.Time // leader's wall clock, display only
	Position  int       // 0 = next in line for this resource
}

// AuditRecord is one entry of the audit log: an operator's action (a
// forced release, a queue purged or deleted, a group deleted). It never
// holds a secret.
type AuditRecord struct {
	Index     uint64 // log index of the entry that made it
	Time      time.Time
	Actor     string
	Action    string
	Resource  string
	LeaseID   uint64
	Token     uint64
	Owner     string // the lease's holder at the time
	Operation string
	Reason    string
}

// ValidateForcedResource checks the resource a forced release (or an
// inspection) names: a resource name, or a name leasehold makes under
// ReservedPrefix — a group member's session (GroupSessionResource), an
// idempotency attempt (IdemResource) or a barrier party's arrival
// (BarrierPartyResource), which may be longer than a caller's resource
// name — so that they are forced like any lease.
func ValidateForcedResource(r string) error {
	if group, member, ok := GroupSessionOf(r); ok && ValidateName("group", group, MaxGroupNameLen, true) == nil &&
		ValidateName("member", member, MaxGroupMemberLen, true) == nil {
		return nil
	}
	if key, ok := IdemKeyOf(r); ok && ValidateName("key", key, MaxIdemKeyLen, true) == nil {
		return nil
	}
	if name, party, ok := BarrierPartyOf(r); ok && ValidateBarrierName(name) == nil &&
		ValidateName("participant", party, MaxBarrierParticipantLen, true) == nil {
		return nil
	}
	return ValidateName("resource", r, MaxResourceLen, true)
}
