package fsm

import (
	"bytes"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A transaction on the key-value space: compares on several keys, then one
// list of writes if every compare holds, else another, all applied at the
// same log index or none at all (etcd's Txn). A fence, if given, is a
// precondition of the whole request, as for Put: a stale token refuses the
// transaction instead of choosing a branch, since the caller has lost the
// right to write at all.

const KindTxn Kind = 12

// CompareOp is what a Compare checks about its key, Compare one condition
// of a Txn, and TxnOp one write of a Txn branch, a put (bound to a lease:
// bound.go) or a delete (leasehold/kv.go).
type (
	CompareOp = leasehold.CompareOp
	Compare   = leasehold.Compare
	TxnOp     = leasehold.TxnOp
)

const (
	CompareVersionEqual   = leasehold.CompareVersionEqual
	CompareVersionGreater = leasehold.CompareVersionGreater
	CompareVersionLess    = leasehold.CompareVersionLess
	CompareValueEqual     = leasehold.CompareValueEqual
	CompareExists         = leasehold.CompareExists
	CompareAbsent         = leasehold.CompareAbsent
	compareOpEnd          = CompareAbsent + 1
)

// Txn is the transaction command.
type Txn struct {
	RequestID string
	Compares  []Compare
	Fence     *leasehold.Fence
	Then      []TxnOp // applied if every compare holds
	Else      []TxnOp // applied otherwise
	Caller    string  // see Acquire.Caller
}

// TxnResult says which branch ran, how each compare came out, and the
// version of each written key after the entry (leasehold/kv.go).
type TxnResult = leasehold.TxnResult

func (*Txn) Kind() Kind                                    { return KindTxn }
func (c *Txn) apply(s *State, ix uint64, now int64) Result { return s.kv.txn(ix, now, c) }

// The op byte of an encoded TxnOp; a new op (a lease-bound put, say) gets
// a new byte without changing the others.
const (
	txnOpPut      = 1
	txnOpDelete   = 2
	txnOpPutBound = 3 // a put bound to a lease
)

func encodeTxnOps(e *encoder, ops []TxnOp) {
	e.uvarint(uint64(len(ops)))
	for _, op := range ops {
		switch {
		case op.Delete:
			e.byte1(txnOpDelete)
			e.str(op.Key)
			continue
		case op.Lease != nil:
			e.byte1(txnOpPutBound)
		default:
			e.byte1(txnOpPut)
		}
		e.str(op.Key)
		e.str(string(op.Value))
		if op.Lease != nil {
			e.uvarint(op.Lease.ID)
			e.hash(op.Lease.SecretHash)
		}
	}
}

func decodeTxnOps(d *decoder) []TxnOp {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	ops := make([]TxnOp, n)
	for i := range ops {
		switch d.byte1() {
		case txnOpPut:
			ops[i] = TxnOp{Key: d.str(), Value: []byte(d.str())}
		case txnOpDelete:
			ops[i] = TxnOp{Delete: true, Key: d.str()}
		case txnOpPutBound:
			ops[i] = TxnOp{Key: d.str(), Value: []byte(d.str()), Lease: &LeaseProof{ID: d.uvarint(), SecretHash: d.hash()}}
		default:
			d.fail()
			return nil
		}
	}
	return ops
}

func (c *Txn) encode(e *encoder) {
	e.str(c.RequestID)
	e.uvarint(uint64(len(c.Compares)))
	for _, cmp := range c.Compares {
		e.str(cmp.Key)
		e.byte1(byte(cmp.Op))
		e.uvarint(cmp.Version)
		e.str(string(cmp.Value))
	}
	encodeFence(e, c.Fence)
	encodeTxnOps(e, c.Then)
	encodeTxnOps(e, c.Else)
	e.str(c.Caller)
}

func (c *Txn) decode(d *decoder) {
	c.RequestID = d.str()
	if n := d.count(4); n > 0 {
		c.Compares = make([]Compare, n)
		for i := range c.Compares {
			c.Compares[i] = Compare{Key: d.str(), Op: CompareOp(d.byte1()), Version: d.uvarint()}
			if v := d.str(); v != "" { // only value_equal has one
				c.Compares[i].Value = []byte(v)
			}
		}
	}
	c.Fence = decodeFence(d)
	c.Then = decodeTxnOps(d)
	c.Else = decodeTxnOps(d)
	c.Caller = d.str() // Txn is newer than caller scoping: never legacy
}

func (c *Txn) key() string { return requestKey(c.Caller, [32]byte{}, c.RequestID) }

// sum covers the whole request: its encoding without the request ID and
// caller, which are in its key.
func (c *Txn) sum(e *encoder) fingerprint {
	if !e.startSum(false, c.RequestID) { // never legacy
		return fingerprint{}
	}
	id, caller := c.RequestID, c.Caller
	c.RequestID, c.Caller = "", ""
	c.encode(e)
	c.RequestID, c.Caller = id, caller
	return sumOf(e)
}

func (kv *kvState) txn(ix uint64, now int64, c *Txn) Result {
	s := kv.st
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := c.key(), c.sum(&s.scratch)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindTxn, sum); ok {
		return r
	}
	r := kv.doTxn(ix, c)
	s.dedup.put(key, KindTxn, sum, now, r, s.cfg)
	return r
}

// doTxn checks everything that could refuse the transaction before it
// writes anything, so it applies whole or not at all.
func (kv *kvState) doTxn(ix uint64, c *Txn) Result {
	s := kv.st
	if err := kv.validateTxn(c); err != nil {
		return Result{Err: err}
	}
	if c.Fence != nil {
		if err := s.CheckFenceTarget(*c.Fence); err != nil {
			return Result{Err: err}
		}
	}
	for _, op := range append(c.Then[:len(c.Then):len(c.Then)], c.Else...) {
		if err := kv.checkBinding(op.Key, op.Lease); err != nil {
			return Result{Err: err}
		}
	}
	res := &TxnResult{Succeeded: true, Compares: make([]bool, len(c.Compares))}
	for i, cmp := range c.Compares {
		res.Compares[i] = kv.holds(cmp)
		res.Succeeded = res.Succeeded && res.Compares[i]
	}
	ops := c.Else
	if res.Succeeded {
		ops = c.Then
	}
	grow := 0
	for _, op := range ops {
		old, had := kv.items.get(op.Key)
		switch {
		case op.Delete && had:
			grow -= len(op.Key) + len(old.Value)
		case !op.Delete && had:
			grow += len(op.Value) - len(old.Value)
		case !op.Delete:
			grow += len(op.Key) + len(op.Value)
		}
	}
	if grow > 0 && kv.bytes+grow > leasehold.MaxKVBytes {
		return Result{Err: leasehold.Errorf(leasehold.CodeLimit,
			"the key-value space is full (%d bytes); the transaction wrote nothing", leasehold.MaxKVBytes)}
	}
	res.Versions = make([]uint64, len(ops))
	for i, op := range ops {
		if op.Delete {
			if _, had := kv.items.get(op.Key); had {
				old := kv.deleteItem(op.Key)
				s.emitKV(EventDeleted, op.Key, nil, old.Version, 0)
			}
			continue
		}
		it := Item{Value: op.Value, Version: ix}
		if op.Lease != nil {
			it.Lease = op.Lease.ID
		}
		old, had := kv.items.get(op.Key)
		kv.bytes += len(op.Value) - len(old.Value)
		if !had {
			kv.bytes += len(op.Key)
		}
		kv.setItem(op.Key, it)
		s.emitKV(EventPut, op.Key, op.Value, ix, it.Lease)
		res.Versions[i] = ix
	}
	return Result{Answer: &KVResult{Version: ix, Txn: res}}
}

// holds reports whether a compare holds on the state before the
// transaction.
func (kv *kvState) holds(c Compare) bool {
	it, ok := kv.items.get(c.Key)
	switch c.Op {
	case CompareVersionEqual:
		return it.Version == c.Version
	case CompareVersionGreater:
		return it.Version > c.Version
	case CompareVersionLess:
		return it.Version < c.Version
	case CompareValueEqual:
		return ok && bytes.Equal(it.Value, c.Value)
	case CompareExists:
		return ok
	case CompareAbsent:
		return !ok
	}
	return false
}

func (kv *kvState) validateTxn(c *Txn) error {
	cfg := &kv.st.cfg
	if max := cfg.MaxTxnCompares; max > 0 && len(c.Compares) > max {
		return leasehold.Errorf(leasehold.CodeLimit,
			"the transaction has %d compares; the limit is %d (max_txn_compares)", len(c.Compares), max)
	}
	if n := max(len(c.Then), len(c.Else)); cfg.MaxTxnOps > 0 && n > cfg.MaxTxnOps {
		return leasehold.Errorf(leasehold.CodeLimit,
			"a branch of the transaction has %d operations; the limit is %d (max_txn_ops)", n, cfg.MaxTxnOps)
	}
	if len(c.Then) == 0 && len(c.Else) == 0 {
		return leasehold.Errorf(leasehold.CodeInvalid, "the transaction has no operations in either branch")
	}
	total := 0
	for i, cmp := range c.Compares {
		if err := leasehold.ValidateName("compare key", cmp.Key, leasehold.MaxKeyLen, true); err != nil {
			return err
		}
		if cmp.Op == 0 || cmp.Op >= compareOpEnd {
			return leasehold.Errorf(leasehold.CodeInvalid, "compare %d on key %q has an unknown operator (%d)", i, cmp.Key, cmp.Op)
		}
		if cmp.Op != CompareValueEqual && len(cmp.Value) > 0 {
			return leasehold.Errorf(leasehold.CodeInvalid, "compare %d on key %q is %v and takes no value", i, cmp.Key, cmp.Op)
		}
		if len(cmp.Value) > leasehold.MaxValueBytes {
			return leasehold.Errorf(leasehold.CodeInvalid,
				"compare %d on key %q has a %d-byte value; the limit is %d", i, cmp.Key, len(cmp.Value), leasehold.MaxValueBytes)
		}
		total += len(cmp.Value)
	}
	for _, branch := range [...]struct {
		name string
		ops  []TxnOp
	}{{"then", c.Then}, {"else", c.Else}} {
		seen := make(map[string]bool, len(branch.ops))
		for _, op := range branch.ops {
			if err := leasehold.ValidateName("key", op.Key, leasehold.MaxKeyLen, true); err != nil {
				return err
			}
			if seen[op.Key] {
				return leasehold.Errorf(leasehold.CodeInvalid,
					"key %q is written twice in the %s branch; write each key once per branch", op.Key, branch.name)
			}
			seen[op.Key] = true
			if op.Delete && (len(op.Value) > 0 || op.Lease != nil) {
				return leasehold.Errorf(leasehold.CodeInvalid, "the delete of key %q carries a value or a lease", op.Key)
			}
			if err := validLeaseProof(op.Key, op.Lease); err != nil {
				return err
			}
			if len(op.Value) > leasehold.MaxValueBytes {
				return leasehold.Errorf(leasehold.CodeInvalid,
					"value for key %q is %d bytes; the limit is %d", op.Key, len(op.Value), leasehold.MaxValueBytes)
			}
			total += len(op.Value)
		}
	}
	if max := cfg.MaxTxnBytes; max > 0 && total > max {
		return leasehold.Errorf(leasehold.CodeLimit,
			"the transaction carries %d bytes of values; the limit is %d (max_txn_bytes)", total, max)
	}
	return nil
}

// txnAnswer keeps a transaction's answer in its dedup record (snapshot
// version 6), after the version encodeResult wrote.
var txnAnswer = &answerCodec{since: 6,
	write: func(e *encoder, r Result) { encodeTxnResult(e, r.Txn()) },
	read: func(d *decoder, r *Result) {
		if txn := decodeTxnResult(d); txn != nil {
			a, _ := r.Answer.(*KVResult)
			if a == nil {
				a = &KVResult{}
				r.Answer = a
			}
			a.Txn = txn
		}
	},
}

func encodeTxnResult(e *encoder, r *TxnResult) {
	e.bool(r != nil)
	if r == nil {
		return
	}
	e.bool(r.Succeeded)
	e.uvarint(uint64(len(r.Compares)))
	for _, ok := range r.Compares {
		e.bool(ok)
	}
	e.uvarint(uint64(len(r.Versions)))
	for _, v := range r.Versions {
		e.uvarint(v)
	}
}

func decodeTxnResult(d *decoder) *TxnResult {
	if !d.bool() {
		return nil
	}
	r := &TxnResult{Succeeded: d.bool()}
	if n := d.count(1); n > 0 {
		r.Compares = make([]bool, n)
		for i := range r.Compares {
			r.Compares[i] = d.bool()
		}
	}
	if n := d.count(1); n > 0 {
		r.Versions = make([]uint64, n)
		for i := range r.Versions {
			r.Versions[i] = d.uvarint()
		}
	}
	return r
}
