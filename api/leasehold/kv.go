package leasehold

import "strconv"

// The vocabulary of the fenced key-value space: its limits, an item, the
// transaction's compares and writes, and the fence that ties a write to a
// holder's token.

// Limits of the fenced key-value space.
const (
	MaxKeyLen     = 256
	MaxValueBytes = 64 << 10
	MaxKVBytes    = 256 << 20 // keys and values together, per cluster
	// The default limits of one transaction (a node's state machine may be
	// configured otherwise; the API edge checks these).
	MaxTxnCompares = 64
	MaxTxnOps      = 64        // per branch
	MaxTxnBytes    = 256 << 10 // of values, compares and writes together
)

// Item is a stored value.
type Item struct {
	Value   []byte
	Version uint64 // log index of the last write
	Lease   uint64 // the lease the key is bound to (0: none)
}

// KeyItem is a key and what it holds, as a list gives it.
type KeyItem struct {
	Key string
	Item
}

// CompareOp is what a Compare checks about its key.
type CompareOp uint8

const (
	CompareVersionEqual   CompareOp = iota + 1 // the key's version == Version (0: absent)
	CompareVersionGreater                      // version > Version
	CompareVersionLess                         // version < Version (absent counts as 0)
	CompareValueEqual                          // the key exists and holds Value
	CompareExists                              // the key exists
	CompareAbsent                              // the key does not exist
)

func (o CompareOp) String() string {
	names := [...]string{"", "version_equal", "version_greater", "version_less", "value_equal", "exists", "absent"}
	if int(o) < len(names) && o != 0 {
		return names[o]
	}
	return "unknown compare"
}

// Compare is one condition of a transaction.
type Compare struct {
	Key     string
	Op      CompareOp
	Version uint64 // for the version compares
	Value   []byte // for CompareValueEqual
}

// TxnOp is one write of a transaction's branch: a put of Value at Key, or
// a delete of Key. Deleting an absent key does nothing (as in etcd), so a
// branch never fails half-way.
type TxnOp struct {
	Delete bool
	Key    string
	Value  []byte
	Lease  *LeaseProof // a put: bind the key to this lease
}

// LeaseProof names a lease and proves its holder wrote: the hash of its
// secret, checked as for a renewal.
type LeaseProof struct {
	ID         uint64
	SecretHash [32]byte
}

// TxnResult says which branch ran, how each compare came out, and the
// version of each written key after the entry, in the order of the
// branch's ops (0 for a deleted key).
type TxnResult struct {
	Succeeded bool
	Compares  []bool
	Versions  []uint64
}

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
