package fsm

import (
	"strconv"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Lease-bound keys (ZooKeeper's ephemeral nodes, Consul's session keys): a
// write may name a lease its writer holds, proven by the lease's secret;
// the key is then deleted in the same apply that ends the lease, for any
// reason (release, expiry, max hold, forced release, a canceled grant).
//
// A bound write is a transaction op (TxnOp.Lease); a plain Put is a
// one-op Txn when it must bind, so the Put encoding stays as it is.
// Writing a key rebinds it to the writer's lease, as etcd does: the last
// writer owns it, and a plain write (no lease) unbinds it. Deleting it
// unbinds it too. The index lease -> keys makes ending a lease cost
// O(its keys).

// LeaseProof names a lease and proves its holder wrote: the hash of its
// secret, checked as for a renewal (leasehold/kv.go).
type LeaseProof = leasehold.LeaseProof

// setItem stores it at key and keeps the lease index up to date.
func (kv *kvState) setItem(key string, it Item) {
	if old := kv.items.at(key).Lease; old != 0 && old != it.Lease {
		kv.unbind(old, key)
	}
	if it.Lease != 0 {
		if kv.bound[it.Lease] == nil {
			kv.bound[it.Lease] = make(map[string]struct{})
		}
		kv.bound[it.Lease][key] = struct{}{}
	}
	kv.items.set(key, it)
}

// deleteItem removes key (which exists) and returns what it held.
func (kv *kvState) deleteItem(key string) Item {
	old := kv.items.at(key)
	if old.Lease != 0 {
		kv.unbind(old.Lease, key)
	}
	kv.items.del(key)
	kv.bytes -= len(key) + len(old.Value)
	return old
}

func (kv *kvState) unbind(id uint64, key string) {
	keys := kv.bound[id]
	delete(keys, key)
	if len(keys) == 0 {
		delete(kv.bound, id)
	}
}

// dropBound deletes the keys bound to a lease that just ended, in key
// order so every node reports them alike.
func (kv *kvState) dropBound(id uint64) {
	keys := kv.bound[id]
	if len(keys) == 0 {
		return
	}
	for _, k := range sortedKeys(keys) {
		old := kv.deleteItem(k)
		kv.st.emitKV(EventDeleted, k, nil, old.Version, id)
	}
}

// checkBinding refuses a bound write by anyone but the lease's holder.
func (kv *kvState) checkBinding(key string, p *LeaseProof) error {
	if p == nil {
		return nil
	}
	if _, err := kv.st.leases.holderOf(p.ID, p.SecretHash, "bind key "+strconv.Quote(key)+" to"); err != nil {
		return err
	}
	return nil
}

// BoundKeys lists the keys bound to a lease, in order.
func (s *State) BoundKeys(id uint64) []string {
	return sortedKeys(s.kv.bound[id])
}

// validLeaseProof checks the shape of a proof (its lease is checked when
// the write applies).
func validLeaseProof(key string, p *LeaseProof) error {
	if p != nil && p.ID == 0 {
		return leasehold.Errorf(leasehold.CodeInvalid, "the write of key %q names lease 0; name the lease to bind it to", key)
	}
	return nil
}
