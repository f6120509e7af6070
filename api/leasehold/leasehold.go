// Package leasehold holds the domain types and input rules shared by the
// client and the server. It has no dependencies beyond the standard library.
package leasehold

import (
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits enforced at the API edge and again in the state machine.
const (
	MaxResources     = 64
	MaxResourceLen   = 256
	MaxOwnerLen      = 128
	MaxOperationLen  = 128
	MaxMetadataBytes = 4096
	MaxProgressLen   = 256
	MaxRequestIDLen  = 64
	MinTTL           = 100 * time.Millisecond
	MaxTTL           = time.Hour
	MaxWait          = time.Hour
	MaxLockDelay     = time.Hour
	MaxMaxHold       = 7 * 24 * time.Hour
	SecretBytes      = 16 // a lease secret is 128 random bits, hex encoded on the wire
	DefaultTTL       = 15 * time.Second
	DefaultListLimit = 100
	MaxListLimit     = 1000
	MaxBatchOps      = 256  // operations in one Leases.Batch request
	MaxSessionOps    = 1024 // unanswered operations on one session stream
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

// ValidateName checks a resource name, owner or operation: non-empty when
// required, valid UTF-8, printable, and at most max bytes.
func ValidateName(field, s string, max int, required bool) error {
	if s == "" {
		if required {
			return Errorf(CodeInvalid, "%s must not be empty", field)
		}
		return nil
	}
	if len(s) > max {
		return Errorf(CodeInvalid, "%s is %d bytes long; the limit is %d", field, len(s), max)
	}
	if !utf8.ValidString(s) {
		return Errorf(CodeInvalid, "%s is not valid UTF-8", field)
	}
	for i, r := range s {
		if !unicode.IsPrint(r) {
			return Errorf(CodeInvalid, "%s has a control or non-printable character at byte %d", field, i)
		}
	}
	return nil
}

// ValidateResources checks a resource list: 1..MaxResources distinct names.
func ValidateResources(rs []string) error {
	if len(rs) == 0 {
		return Errorf(CodeInvalid, "resources must name at least one resource")
	}
	if len(rs) > MaxResources {
		return Errorf(CodeInvalid, "resources names %d resources; the limit is %d", len(rs), MaxResources)
	}
	seen := make(map[string]struct{}, len(rs))
	for _, r := range rs {
		if err := ValidateName("resource name", r, MaxResourceLen, true); err != nil {
			return err
		}
		if _, dup := seen[r]; dup {
			return Errorf(CodeInvalid, "resource %q is named twice", r)
		}
		seen[r] = struct{}{}
	}
	return nil
}

// ValidateDuration checks that min <= d <= max; min 0 allows zero.
func ValidateDuration(field string, d, min, max time.Duration) error {
	if d < min || d > max {
		if min == 0 {
			return Errorf(CodeInvalid, "%s is %v; it must be between 0 and %v", field, d, max)
		}
		return Errorf(CodeInvalid, "%s is %v; it must be between %v and %v", field, d, min, max)
	}
	return nil
}

// ValidateMetadata checks the metadata map: keys and values are names, and
// together they fit in MaxMetadataBytes.
func ValidateMetadata(md map[string]string) error {
	total := 0
	for k, v := range md {
		if err := ValidateName("metadata key", k, MaxMetadataBytes, true); err != nil {
			return err
		}
		if !utf8.ValidString(v) {
			return Errorf(CodeInvalid, "metadata value for %q is not valid UTF-8", k)
		}
		total += len(k) + len(v)
	}
	if total > MaxMetadataBytes {
		return Errorf(CodeInvalid, "metadata is %d bytes; the limit is %d", total, MaxMetadataBytes)
	}
	return nil
}

// Limits of the fenced key-value space.
const (
	MaxKeyLen     = 256
	MaxValueBytes = 64 << 10
	MaxKVBytes    = 256 << 20 // keys and values together, per cluster
)

// Fence ties a write to a holder's token: it applies only while the token
// is current for its target, which is exactly one of: a resource (the
// token of the lease that holds it), a partition of a group (its owner's
// epoch, also while being revoked) or a key of a keyed queue (the token of
// its delivery in flight).
type Fence struct {
	Resource string
	Token    uint64
	// Group and Partition name a partition instead of a resource.
	Group     string
	Partition uint32
	// Queue and Key name a queue's key instead of a resource.
	Queue string
	Key   string
}

// Target names what the fence guards, for messages: `resource "r"`,
// `partition 3 of group "g"` or `key "k" of queue "q"`.
func (f Fence) Target() string {
	switch {
	case f.Group != "":
		return "partition " + strconv.FormatUint(uint64(f.Partition), 10) + " of group " + strconv.Quote(f.Group)
	case f.Queue != "":
		return "key " + strconv.Quote(f.Key) + " of queue " + strconv.Quote(f.Queue)
	}
	return strconv.Quote(f.Resource)
}
