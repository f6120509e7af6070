package service

import (
	"context"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// PutRequest writes Value at Key: conditional on the key's version if
// HasIfVersion (0: absent), fenced if Fence is set, and bound to a lease
// its writer holds if Lease is set (the key is deleted in the log entry
// that ends the lease).
type PutRequest struct {
	Key          string
	Value        []byte
	HasIfVersion bool
	IfVersion    uint64
	Fence        *leasehold.Fence
	Lease        *leasehold.LeaseProof
	RequestID    string
}

// DeleteRequest removes Key, conditional and fenced as a Put.
type DeleteRequest struct {
	Key          string
	HasIfVersion bool
	IfVersion    uint64
	Fence        *leasehold.Fence
	RequestID    string
}

// TxnRequest is a multi-key transaction: Then is applied if every compare
// holds, Else otherwise, in one log entry, fenced if Fence is set.
type TxnRequest struct {
	Compares  []leasehold.Compare
	Then      []leasehold.TxnOp
	Else      []leasehold.TxnOp
	Fence     *leasehold.Fence
	RequestID string
}

// Put writes a key and returns its new version. A put bound to a lease
// goes as a one-op transaction (the state machine binds keys only in
// transactions) whose compare is the put's IfVersion; a failed compare
// answers as a plain put's does.
func (s *Service) Put(ctx context.Context, req *PutRequest) (uint64, error) {
	caller := CallerOf(ctx).Name
	if req.Lease == nil {
		return s.write(ctx, &fsm.Put{Key: req.Key, Value: req.Value, HasIfVersion: req.HasIfVersion, IfVersion: req.IfVersion,
			Fence: req.Fence, RequestID: req.RequestID, Caller: caller})
	}
	lease := *req.Lease
	txn := &fsm.Txn{
		RequestID: req.RequestID,
		Fence:     req.Fence,
		Then:      []fsm.TxnOp{{Key: req.Key, Value: req.Value, Lease: &lease}},
		Caller:    caller,
	}
	if req.HasIfVersion {
		txn.Compares = []fsm.Compare{{Key: req.Key, Op: fsm.CompareVersionEqual, Version: req.IfVersion}}
	}
	res, _, err := s.txn(ctx, txn)
	if err != nil {
		return 0, err
	}
	if !res.Succeeded {
		if req.IfVersion == 0 {
			return 0, leasehold.Errorf(leasehold.CodeVersionMismatch, "key %q exists; expected it absent", req.Key)
		}
		return 0, leasehold.Errorf(leasehold.CodeVersionMismatch, "key %q is not at version %d", req.Key, req.IfVersion)
	}
	return res.Versions[0], nil
}

// Delete removes a key and returns its last version.
func (s *Service) Delete(ctx context.Context, req *DeleteRequest) (uint64, error) {
	return s.write(ctx, &fsm.Delete{Key: req.Key, HasIfVersion: req.HasIfVersion, IfVersion: req.IfVersion,
		Fence: req.Fence, RequestID: req.RequestID, Caller: CallerOf(ctx).Name})
}

// Txn applies a multi-key transaction in one log entry and says which
// branch ran, how each compare came out and each written key's version.
// index is the log entry that applied it. A refused transaction (stale
// fence, a bound write by a non-holder, a limit) wrote nothing.
func (s *Service) Txn(ctx context.Context, req *TxnRequest) (res leasehold.TxnResult, index uint64, err error) {
	return s.txn(ctx, &fsm.Txn{RequestID: req.RequestID, Compares: req.Compares, Fence: req.Fence, Then: req.Then,
		Else: req.Else, Caller: CallerOf(ctx).Name})
}

func (s *Service) txn(ctx context.Context, cmd *fsm.Txn) (leasehold.TxnResult, uint64, error) {
	r, err := s.node.Propose(ctx, cmd)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return leasehold.TxnResult{}, 0, err
	}
	var res leasehold.TxnResult
	if t := r.Txn(); t != nil {
		res = *t
	}
	return res, r.Version(), nil
}

func (s *Service) write(ctx context.Context, cmd fsm.Command) (uint64, error) {
	res, err := s.node.Propose(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	return res.Version(), err
}

// Get reads a key's value, version and bound lease.
func (s *Service) Get(ctx context.Context, key string) (leasehold.Item, error) {
	var it leasehold.Item
	var found bool
	if err := s.node.Read(ctx, func(st *fsm.State) { it, found = st.Get(key) }); err != nil {
		return leasehold.Item{}, err
	}
	if !found {
		return leasehold.Item{}, leasehold.Errorf(leasehold.CodeNotFound, "key %q does not exist", key)
	}
	return it, nil
}

// ListKeys reads up to limit keys under prefix after the key after, in
// order, and whether more follow.
func (s *Service) ListKeys(ctx context.Context, prefix, after string, limit int) (items []leasehold.KeyItem, more bool, err error) {
	err = s.node.Read(ctx, func(st *fsm.State) { items, more = st.Keys(prefix, after, limit) })
	return items, more, err
}

// CheckFence says whether f's token is still current for its target (nil)
// or stale (leasehold.ErrStaleToken).
func (s *Service) CheckFence(ctx context.Context, f leasehold.Fence) error {
	var verdict error
	if err := s.node.Read(ctx, func(st *fsm.State) { verdict = st.CheckFenceTarget(f) }); err != nil {
		return err
	}
	return verdict
}
