package service

import (
	"context"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// Put writes a key (fenced and conditional as cmd says) and returns its new
// version.
func (s *Service) Put(ctx context.Context, cmd *fsm.Put) (uint64, error) {
	return s.write(ctx, cmd)
}

// PutBound is Put with the key bound to a lease its writer holds: the key
// is deleted in the log entry that ends the lease. The state machine binds
// keys only in transactions, so this proposes cmd as a one-op Txn whose
// compare is cmd's IfVersion; a failed compare answers as Put's does.
func (s *Service) PutBound(ctx context.Context, cmd *fsm.Put, lease fsm.LeaseProof) (uint64, error) {
	txn := &fsm.Txn{
		RequestID: cmd.RequestID,
		Fence:     cmd.Fence,
		Then:      []fsm.TxnOp{{Key: cmd.Key, Value: cmd.Value, Lease: &lease}},
		Caller:    cmd.Caller,
	}
	if cmd.HasIfVersion {
		txn.Compares = []fsm.Compare{{Key: cmd.Key, Op: fsm.CompareVersionEqual, Version: cmd.IfVersion}}
	}
	res, _, err := s.Txn(ctx, txn)
	if err != nil {
		return 0, err
	}
	if !res.Succeeded {
		if cmd.IfVersion == 0 {
			return 0, leasehold.Errorf(leasehold.CodeVersionMismatch, "key %q exists; expected it absent", cmd.Key)
		}
		return 0, leasehold.Errorf(leasehold.CodeVersionMismatch, "key %q is not at version %d", cmd.Key, cmd.IfVersion)
	}
	return res.Versions[0], nil
}

// Delete removes a key and returns its last version.
func (s *Service) Delete(ctx context.Context, cmd *fsm.Delete) (uint64, error) {
	return s.write(ctx, cmd)
}

// Txn applies a multi-key transaction in one log entry and says which
// branch ran, how each compare came out and each written key's version.
// index is the log entry that applied it. A refused transaction (stale
// fence, a bound write by a non-holder, a limit) wrote nothing.
func (s *Service) Txn(ctx context.Context, cmd *fsm.Txn) (res *fsm.TxnResult, index uint64, err error) {
	r, err := s.node.Propose(ctx, cmd)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return nil, 0, err
	}
	return r.Txn(), r.Version(), nil
}

func (s *Service) write(ctx context.Context, cmd fsm.Command) (uint64, error) {
	res, err := s.node.Propose(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	return res.Version(), err
}

// Get reads a key's value, version and bound lease.
func (s *Service) Get(ctx context.Context, key string) (fsm.Item, error) {
	var it fsm.Item
	var found bool
	if err := s.node.Read(ctx, func(st *fsm.State) { it, found = st.Get(key) }); err != nil {
		return fsm.Item{}, err
	}
	if !found {
		return fsm.Item{}, leasehold.Errorf(leasehold.CodeNotFound, "key %q does not exist", key)
	}
	return it, nil
}

// ListKeys reads up to limit keys under prefix after the key after, in
// order, and whether more follow.
func (s *Service) ListKeys(ctx context.Context, prefix, after string, limit int) (items []fsm.KeyItem, more bool, err error) {
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
