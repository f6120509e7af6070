package client

import (
	"context"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
)

// Txn is a multi-key transaction being built: compares (If), the writes
// to apply if every compare holds (Then), and those to apply otherwise
// (Else). Commit applies one branch in a single log entry, or nothing:
//
//	res, err := c.Txn(ctx).
//		If(client.VersionEquals("stock/apples", v)).
//		Then(client.OpPut("stock/apples", []byte("11")), client.OpPut("orders/7", order)).
//		Commit()
//
// A Txn is for one Commit by one goroutine.
type Txn struct {
	c   *Client
	ctx context.Context
	req *pb.TxnRequest
	err error
}

// Cmp is one compare of a Txn.
type Cmp struct{ pb *pb.Compare }

// Op is one write of a Txn branch.
type Op struct {
	pb  *pb.TxnOp
	err error
}

// TxnResult is what a committed Txn did.
type TxnResult struct {
	// Succeeded: every compare held and the Then writes ran; otherwise
	// the Else writes ran.
	Succeeded bool
	// Compares holds each compare's outcome, in the order given.
	Compares []bool
	// Writes are the keys the branch wrote, in its order, each with its
	// version after the transaction (0 for a delete).
	Writes []KeyVersion
	// Index is the log index that applied the transaction.
	Index uint64
}

// KeyVersion is a key written by a Txn and its new version.
type KeyVersion struct {
	Key     string
	Version uint64
}

// Txn starts a transaction that Commit sends with ctx.
func (c *Client) Txn(ctx context.Context) *Txn {
	return &Txn{c: c, ctx: ctx, req: &pb.TxnRequest{}}
}

// VersionEquals holds if key is at version v (0: key absent).
func VersionEquals(key string, v uint64) Cmp {
	return Cmp{&pb.Compare{Key: key, Op: pb.CompareOp_COMPARE_OP_VERSION_EQUAL, Version: v}}
}

// VersionGreater holds if key's version is greater than v.
func VersionGreater(key string, v uint64) Cmp {
	return Cmp{&pb.Compare{Key: key, Op: pb.CompareOp_COMPARE_OP_VERSION_GREATER, Version: v}}
}

// VersionLess holds if key's version is less than v (absent counts as 0).
func VersionLess(key string, v uint64) Cmp {
	return Cmp{&pb.Compare{Key: key, Op: pb.CompareOp_COMPARE_OP_VERSION_LESS, Version: v}}
}

// ValueEquals holds if key exists and holds value.
func ValueEquals(key string, value []byte) Cmp {
	return Cmp{&pb.Compare{Key: key, Op: pb.CompareOp_COMPARE_OP_VALUE_EQUAL, Value: value}}
}

// Exists holds if key exists.
func Exists(key string) Cmp { return Cmp{&pb.Compare{Key: key, Op: pb.CompareOp_COMPARE_OP_EXISTS}} }

// Absent holds if key does not exist.
func Absent(key string) Cmp { return Cmp{&pb.Compare{Key: key, Op: pb.CompareOp_COMPARE_OP_ABSENT}} }

// OpPut writes value at key. Its only option is BindLease.
func OpPut(key string, value []byte, opts ...WriteOption) Op {
	var o writeOptions
	for _, f := range opts {
		f(&o)
	}
	put := &pb.TxnPut{Key: key, Value: value}
	if o.lease != nil {
		put.LeaseId, put.LeaseSecret = o.lease.ID(), o.lease.Secret()
	}
	op := Op{pb: &pb.TxnOp{Op: &pb.TxnOp_Put{Put: put}}}
	if o.ifVersion != nil || o.fence != nil {
		op.err = leasehold.Errorf(leasehold.CodeInvalid,
			"OpPut of %q takes only BindLease: give a transaction's conditions with If and its fence with FencedBy", key)
	}
	return op
}

// OpDelete deletes key (nothing, if it is absent).
func OpDelete(key string) Op {
	return Op{pb: &pb.TxnOp{Op: &pb.TxnOp_Delete{Delete: &pb.TxnDelete{Key: key}}}}
}

// If adds compares; all must hold for Then to run.
func (t *Txn) If(cmps ...Cmp) *Txn {
	for _, c := range cmps {
		t.req.Compares = append(t.req.Compares, c.pb)
	}
	return t
}

// Then adds writes applied if every compare holds.
func (t *Txn) Then(ops ...Op) *Txn {
	t.req.ThenOps = t.add(t.req.ThenOps, ops)
	return t
}

// Else adds writes applied if some compare fails.
func (t *Txn) Else(ops ...Op) *Txn {
	t.req.ElseOps = t.add(t.req.ElseOps, ops)
	return t
}

func (t *Txn) add(to []*pb.TxnOp, ops []Op) []*pb.TxnOp {
	for _, op := range ops {
		if op.err != nil && t.err == nil {
			t.err = op.err
		}
		to = append(to, op.pb)
	}
	return to
}

// FencedBy makes the whole transaction apply only while lease l holds
// resource; otherwise Commit fails with leasehold.ErrStaleToken and
// neither branch runs.
func (t *Txn) FencedBy(l *Lease, resource string) *Txn { return t.Fence(resource, l.Token()) }

// Fence is FencedBy for a token known by number.
func (t *Txn) Fence(resource string, token uint64) *Txn {
	t.req.Fence = &pb.Fence{Resource: resource, Token: token}
	return t
}

// FencedByPartition makes the whole transaction apply only while epoch is
// the current grant of partition of group (see the WriteOption).
func (t *Txn) FencedByPartition(group string, partition int, epoch uint64) *Txn {
	t.req.Fence = partitionFence(group, partition, epoch)
	return t
}

// FencedByDelivery makes the whole transaction apply only while the
// delivery with token of queue's key is in flight (see the WriteOption).
func (t *Txn) FencedByDelivery(queue, key string, token uint64) *Txn {
	t.req.Fence = &pb.Fence{Queue: queue, Key: key, Token: token}
	return t
}

// Commit sends the transaction, retrying on another node while none
// answers (with the same request ID, so it applies at most once). A
// refused transaction (a limit, a stale fence, a bound write whose lease
// is gone or not the caller's) returns an error and wrote nothing; a
// failed compare is not an error: the Else branch ran.
func (t *Txn) Commit() (*TxnResult, error) {
	if t.err != nil {
		return nil, t.err
	}
	t.req.RequestId = randomHex(16)
	r, err := call(t.ctx, t.c, t.c.cfg.RequestTimeout, kvOf, leaseholdv1connect.KVClient.Txn, t.req)
	if err != nil {
		return nil, err
	}
	out := &TxnResult{Succeeded: r.Succeeded, Compares: r.Compares, Index: r.Index}
	for _, w := range r.Results {
		out.Writes = append(out.Writes, KeyVersion{Key: w.Key, Version: w.Version})
	}
	return out, nil
}
