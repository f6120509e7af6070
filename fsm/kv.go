package fsm

import (
	"github.com/leasehold/leasehold/api/leasehold"
)

// The fenced key-value space: small values with a version (the log index
// of their last write) that a write can compare, and a fence that a write
// can carry. A fenced write applies only if its token belongs to the lease
// that holds the resource right now, so a lease that expired, was released
// or was force-released is refused at once, even before anyone else
// acquires: stronger than a high-water mark. A fence may name a partition
// or a queue key instead (fence.go).

const (
	KindPut    Kind = 8
	KindDelete Kind = 9
)

// Put writes Value at Key.
type Put struct {
	RequestID string
	Key       string
	Value     []byte
	// IfVersion, when HasIfVersion, must equal the key's version (0: the
	// key must not exist).
	IfVersion    uint64
	HasIfVersion bool
	Fence        *leasehold.Fence
	Caller       string // see Acquire.Caller
	legacy       bool
}

// Delete removes Key, with the same conditions as Put.
type Delete struct {
	RequestID    string
	Key          string
	IfVersion    uint64
	HasIfVersion bool
	Fence        *leasehold.Fence
	Caller       string // see Acquire.Caller
	legacy       bool
}

func (*Put) Kind() Kind    { return KindPut }
func (*Delete) Kind() Kind { return KindDelete }

func (c *Put) apply(s *State, ix uint64, now int64) Result   { return s.kv.put(ix, now, c) }
func (c *Delete) apply(s *State, _ uint64, now int64) Result { return s.kv.del(now, c) }

func (c *Put) encode(e *encoder) {
	e.str(c.RequestID)
	e.str(c.Key)
	e.str(string(c.Value))
	e.bool(c.HasIfVersion)
	e.uvarint(c.IfVersion)
	encodeFence(e, c.Fence)
	e.str(c.Caller)
}

func (c *Put) decode(d *decoder) {
	c.RequestID = d.str()
	c.Key = d.str()
	c.Value = []byte(d.str())
	c.HasIfVersion = d.bool()
	c.IfVersion = d.uvarint()
	c.Fence = decodeFence(d)
	c.Caller, c.legacy = d.caller(), d.legacy
}

func (c *Delete) encode(e *encoder) {
	e.str(c.RequestID)
	e.str(c.Key)
	e.bool(c.HasIfVersion)
	e.uvarint(c.IfVersion)
	encodeFence(e, c.Fence)
	e.str(c.Caller)
}

func (c *Delete) decode(d *decoder) {
	c.RequestID = d.str()
	c.Key = d.str()
	c.HasIfVersion = d.bool()
	c.IfVersion = d.uvarint()
	c.Fence = decodeFence(d)
	c.Caller, c.legacy = d.caller(), d.legacy
}

// The key-value sub-state: the items by key, the keys bound to each lease
// (bound.go) and the bytes of keys and values against MaxKVBytes.
type kvState struct {
	st    *State
	items cowMap[string, Item]
	bound map[uint64]map[string]struct{} // lease -> keys bound to it
	bytes int
}

func (kv *kvState) init(s *State) {
	*kv = kvState{st: s, items: newCowMap[string, Item](), bound: make(map[uint64]map[string]struct{})}
	s.track(&kv.items)
}

func (kv *kvState) captureInto(v *State) {
	v.kv = kvState{st: v, items: kv.items.freeze(), bytes: kv.bytes}
}

func (*kvState) eachCountdown(func(Countdown)) {}

// leaseEnded deletes the keys bound to l.
func (kv *kvState) leaseEnded(l *lease) { kv.dropBound(l.ID) }

// KVResult is what a write of the key-value space answers.
type KVResult struct {
	Version uint64     // put, txn: the key's new version (the entry's index); delete: its last
	Txn     *TxnResult // txn: the branch that ran and its versions
}

func (*KVResult) answer() {}

// Version is the answer's version (KVResult.Version), 0 for none.
func (r Result) Version() uint64 {
	if a, ok := r.Answer.(*KVResult); ok {
		return a.Version
	}
	return 0
}

// Txn is a transaction's answer (KVResult.Txn), nil for none.
func (r Result) Txn() *TxnResult {
	if a, ok := r.Answer.(*KVResult); ok {
		return a.Txn
	}
	return nil
}

// Item is a stored value (leasehold/kv.go); its Lease is the lease the
// key is bound to (0: none; see bound.go).
type Item = leasehold.Item

// CheckFence reports whether token belongs to the lease that holds
// resource now, and if not, why (a *leasehold.Error with CodeStaleToken).
func (s *State) CheckFence(resource string, token uint64) error {
	id, held := s.leases.holders.get(resource)
	if sem := s.sems.byName.at(resource); !held && sem != nil {
		return leasehold.Errorf(leasehold.CodeStaleToken,
			"fencing token %d for %q is stale: %q is a semaphore, whose slots are held, never the name; fence the holder's slot (its lease's resource, %q to %q)",
			token, resource, resource, leasehold.SlotName(resource, 1), leasehold.SlotName(resource, sem.limit))
	}
	if !held {
		return leasehold.Errorf(leasehold.CodeStaleToken,
			"fencing token %d for %q is stale: no lease holds the resource now (newest token issued: %d)",
			token, resource, s.lastToken)
	}
	if l := s.leases.byID.at(id); l.Token != token {
		return leasehold.Errorf(leasehold.CodeStaleToken,
			"fencing token %d for %q is stale: the resource is held by lease %d with token %d", token, resource, l.ID, l.Token)
	}
	return nil
}

// Get returns the item at key.
func (s *State) Get(key string) (Item, bool) {
	it, ok := s.kv.items.get(key)
	return it, ok
}

func (kv *kvState) conditions(key string, hasIf bool, ifVersion uint64, f *leasehold.Fence) error {
	if err := leasehold.ValidateName("key", key, leasehold.MaxKeyLen, true); err != nil {
		return err
	}
	if f != nil {
		if err := kv.st.CheckFenceTarget(*f); err != nil {
			return err
		}
	}
	if hasIf {
		cur := kv.items.at(key).Version
		if cur != ifVersion {
			if ifVersion == 0 {
				return leasehold.Errorf(leasehold.CodeVersionMismatch, "key %q exists (version %d); expected it absent", key, cur)
			}
			return leasehold.Errorf(leasehold.CodeVersionMismatch, "key %q is at version %d, not %d", key, cur, ifVersion)
		}
	}
	return nil
}

func (kv *kvState) put(ix uint64, now int64, c *Put) Result {
	s := kv.st
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := c.key(), c.sum(&s.scratch)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindPut, sum); ok {
		return r
	}
	r := func() Result {
		if len(c.Value) > leasehold.MaxValueBytes {
			return Result{Err: leasehold.Errorf(leasehold.CodeInvalid, "value is %d bytes; the limit is %d", len(c.Value), leasehold.MaxValueBytes)}
		}
		if err := kv.conditions(c.Key, c.HasIfVersion, c.IfVersion, c.Fence); err != nil {
			return Result{Err: err}
		}
		old := kv.items.at(c.Key)
		grow := len(c.Value) - len(old.Value)
		if old.Version == 0 {
			grow += len(c.Key)
		}
		if kv.bytes+grow > leasehold.MaxKVBytes {
			return Result{Err: leasehold.Errorf(leasehold.CodeLimit, "the key-value space is full (%d bytes)", leasehold.MaxKVBytes)}
		}
		kv.bytes += grow
		kv.setItem(c.Key, Item{Value: c.Value, Version: ix}) // unbinds it, if bound
		s.emitKV(EventPut, c.Key, c.Value, ix, 0)
		return Result{Answer: &KVResult{Version: ix}}
	}()
	s.dedup.put(key, KindPut, sum, now, r, s.cfg)
	return r
}

func (kv *kvState) del(now int64, c *Delete) Result {
	s := kv.st
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := c.key(), c.sum(&s.scratch)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindDelete, sum); ok {
		return r
	}
	r := func() Result {
		if err := kv.conditions(c.Key, c.HasIfVersion, c.IfVersion, c.Fence); err != nil {
			return Result{Err: err}
		}
		if _, ok := kv.items.get(c.Key); !ok {
			return Result{Err: leasehold.Errorf(leasehold.CodeNotFound, "key %q does not exist", c.Key)}
		}
		old := kv.deleteItem(c.Key)
		s.emitKV(EventDeleted, c.Key, nil, old.Version, 0)
		return Result{Answer: &KVResult{Version: old.Version}}
	}()
	s.dedup.put(key, KindDelete, sum, now, r, s.cfg)
	return r
}

// The snapshot section of the key-value space, by key. Version 6 added
// each key's lease (0: unbound).
func writeKV(s *State, e *encoder) {
	writeSortedCow(e, &s.kv.items, func(k string, it Item) {
		e.str(k)
		e.str(string(it.Value))
		e.uvarint(it.Version)
		e.uvarint(it.Lease)
	})
}

func readKV(s *State, d *decoder, v byte) error {
	for range d.count(3) {
		k := d.str()
		it := Item{Value: []byte(d.str()), Version: d.uvarint()}
		if v >= 6 {
			it.Lease = d.uvarint()
		}
		if _, dup := s.kv.items.get(k); dup || it.Version == 0 || it.Version > s.lastIndex {
			return errCorrupt
		}
		if _, live := s.leases.byID.get(it.Lease); it.Lease != 0 && !live {
			return errCorrupt // a bound key outlived its lease
		}
		s.kv.setItem(k, it)
		s.kv.bytes += len(k) + len(it.Value)
	}
	return nil
}
