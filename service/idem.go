package service

import (
	"context"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// Idempotency keys on a node: Begin (with waiting), Complete, Abandon and
// the reads. The attempt is a lease, so its renewal is Renew.
type (
	IdemBegin    = fsm.IdemBegin
	IdemComplete = fsm.IdemComplete
	Idem         = fsm.Idem
)

// idemPoll is how often a Begin that waits looks at the key again. The
// wait ends when the owning attempt completes or its lease ends, both
// committed entries this node applies; a local read between them is
// cheap, and the answer after the wait is always a fresh Begin.
const idemPoll = 20 * time.Millisecond

// IdemBegin proposes cmd; if another attempt owns the key and wait > 0,
// it waits up to wait for that attempt to complete or lapse, then
// proposes again. The answer of the last Begin is returned.
func (s *Service) IdemBegin(ctx context.Context, cmd *IdemBegin, wait time.Duration) (Result, error) {
	deadline := time.Now().Add(wait)
	for {
		res, err := s.node.Propose(ctx, cmd)
		if err != nil || res.Err != nil || res.Idem.State != fsm.IdemInProgress || wait <= 0 {
			return res, err
		}
		if !s.awaitAttempt(ctx, cmd.Key, res.Idem.Token, deadline) {
			return res, ctx.Err() // still in progress at the deadline (or the caller left)
		}
	}
}

// awaitAttempt waits until attempt token no longer owns key in progress;
// false if the deadline or ctx came first.
func (s *Service) awaitAttempt(ctx context.Context, key string, token uint64, deadline time.Time) bool {
	t := time.NewTicker(idemPoll)
	defer t.Stop()
	for {
		var owned bool
		err := s.node.Read(ctx, func(st *fsm.State) {
			r, ok := st.IdemGet(key)
			owned = ok && r.State == fsm.IdemInProgress && r.Token == token
		})
		if err != nil {
			return ctx.Err() == nil // let the next Begin answer (or forward) it
		}
		if !owned {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// IdemComplete stores an attempt's result.
func (s *Service) IdemComplete(ctx context.Context, cmd *IdemComplete) (Result, error) {
	return s.node.Propose(ctx, cmd)
}

// IdemAbandon ends attempt (a lease) on key so the key is free at once.
// The attempt must be one of key's: a lease id names one lease forever,
// so the check by a read cannot race.
func (s *Service) IdemAbandon(ctx context.Context, key string, cmd *Release) (Result, error) {
	var mine bool
	if err := s.node.Read(ctx, func(st *fsm.State) {
		if l, ok := st.Lease(cmd.LeaseID); ok {
			k, _ := fsm.IdemKeyOf(l.Resources[0])
			mine = k == key
		}
	}); err != nil {
		return Result{}, err
	}
	if !mine {
		return Result{}, leasehold.Errorf(leasehold.CodeStaleToken,
			"attempt %d does not own idempotency key %q: it completed, lapsed or was abandoned already", cmd.LeaseID, key)
	}
	return s.node.Propose(ctx, cmd)
}

// IdemGet reads where key stands.
func (s *Service) IdemGet(ctx context.Context, key string) (Idem, bool, error) {
	var r Idem
	var ok bool
	err := s.node.Read(ctx, func(st *fsm.State) { r, ok = st.IdemGet(key) })
	return r, ok, err
}

// IdemList lists up to limit keys with prefix after after, in key order.
func (s *Service) IdemList(ctx context.Context, prefix, after string, limit int) ([]Idem, error) {
	var out []Idem
	err := s.node.Read(ctx, func(st *fsm.State) { out = st.IdemList(prefix, after, limit) })
	return out, err
}
