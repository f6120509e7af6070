package service

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// Idempotency keys on a node: Begin (with waiting), Complete, Abandon and
// the reads. The attempt is a lease, so its renewal is Renew.

// IdemBeginRequest starts an attempt on Key, or finds what holds it.
// Fingerprint is the hash of what the request asks for; a Begin with
// another one is refused. The attempt is a lease of TTL whose secret's
// hash is SecretHash; a completed result is kept for Retention (0: the
// node's default). With Wait > 0, a Begin that finds another attempt in
// progress waits up to Wait for it to end, and begins again.
type IdemBeginRequest struct {
	Key         string
	Fingerprint [32]byte
	Owner       string
	TTL         time.Duration
	Retention   time.Duration
	SecretHash  [32]byte
	Wait        time.Duration
}

// IdemBegun is a Begin's answer: where the key stands (Record.State:
// started, in progress or completed), and for a started attempt how long
// its lease runs.
type IdemBegun struct {
	Record    leasehold.IdemRecord
	Remaining time.Duration
}

// IdemCompleteRequest stores the result of the attempt Attempt (its lease
// id), proven by its secret's hash.
type IdemCompleteRequest struct {
	Key        string
	Attempt    uint64
	SecretHash [32]byte
	Result     []byte
}

// IdemAbandonRequest ends the attempt Attempt on Key so that the key is
// free at once.
type IdemAbandonRequest struct {
	Key        string
	Attempt    uint64
	SecretHash [32]byte
	RequestID  string
}

// idemFallbackPoll is how often a Begin that waits looks at the key again
// if nothing woke it. The wait ends when the owning attempt's lease ends
// (completed, abandoned or lapsed), an event of the key's resource that
// wakes the waiter through the node's watch hub; the poll is only for a
// wake-up that cannot come (the watcher was cut off, or a snapshot
// replaced the history). A variable so a test can make it long
// (export_test.go).
var idemFallbackPoll = time.Second

// IdemBegin proposes req's Begin; if another attempt owns the key and
// req.Wait > 0, it waits up to Wait for that attempt to complete or
// lapse, then proposes again. The answer of the last Begin is returned.
func (s *Service) IdemBegin(ctx context.Context, req *IdemBeginRequest) (IdemBegun, error) {
	cmd := &fsm.IdemBegin{Key: req.Key, Fingerprint: req.Fingerprint, Owner: req.Owner, TTL: req.TTL,
		Retention: req.Retention, SecretHash: req.SecretHash, Caller: CallerOf(ctx).Name}
	wait := req.Wait
	deadline := time.Now().Add(wait)
	for {
		res, err := s.node.Propose(ctx, cmd)
		if err == nil {
			err = res.Err
		}
		if err != nil || res.Idem().State != fsm.IdemInProgress || wait <= 0 {
			return begun(res), err
		}
		if !s.awaitAttempt(ctx, cmd.Key, res.Idem().Token, deadline) {
			return begun(res), ctx.Err() // still in progress at the deadline (or the caller left)
		}
	}
}

func begun(r fsm.Result) IdemBegun {
	b := IdemBegun{Remaining: r.Remaining}
	if r.Idem() != nil {
		b.Record = *r.Idem()
	}
	return b
}

// awaitAttempt waits until attempt token no longer owns key in progress;
// false if the deadline or ctx came first. It watches the key's resource
// from before its read, so an end applied after the read wakes it.
func (s *Service) awaitAttempt(ctx context.Context, key string, token uint64, deadline time.Time) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var woken <-chan Batch
	if w, err := s.hub.Watch(wctx, WatchRequest{Prefixes: []string{fsm.IdemResource(key)}, Now: true}); err == nil {
		defer w.Close()
		woken = w.Batches()
	}
	poll := time.NewTicker(idemFallbackPoll)
	defer poll.Stop()
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
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
	wait:
		for {
			select {
			case <-ctx.Done():
				return false
			case <-timeout.C:
				return false
			case b, ok := <-woken:
				if !ok {
					woken = nil // cut off: the fallback poll carries on
					break wait
				}
				if len(b.Events) > 0 { // a progress mark says nothing of this key
					break wait
				}
			case <-poll.C:
				break wait
			}
		}
	}
}

// IdemComplete stores an attempt's result.
func (s *Service) IdemComplete(ctx context.Context, req *IdemCompleteRequest) error {
	_, err := answer(s.node.Propose(ctx, &fsm.IdemComplete{Key: req.Key, LeaseID: req.Attempt, SecretHash: req.SecretHash,
		Result: req.Result}))
	return err
}

// IdemAbandon ends an attempt (a lease) on its key so the key is free at
// once. The state machine checks that the attempt is one of the key's,
// and answers a retry with the same request ID as the first
// (fsm.IdemAbandon): dup says so.
func (s *Service) IdemAbandon(ctx context.Context, req *IdemAbandonRequest) (dup bool, err error) {
	g, err := answer(s.node.Propose(ctx, &fsm.IdemAbandon{Key: req.Key, Release: fsm.Release{LeaseID: req.Attempt,
		SecretHash: req.SecretHash, Caller: CallerOf(ctx).Name, RequestID: req.RequestID}}))
	return g.Dup, err
}

// IdemGet reads where key stands.
func (s *Service) IdemGet(ctx context.Context, key string) (leasehold.IdemRecord, bool, error) {
	var r leasehold.IdemRecord
	var ok bool
	err := s.node.Read(ctx, func(st *fsm.State) { r, ok = st.IdemGet(key) })
	return r, ok, err
}

// IdemList lists up to limit keys with prefix after after, in key order.
func (s *Service) IdemList(ctx context.Context, prefix, after string, limit int) ([]leasehold.IdemRecord, error) {
	var out []leasehold.IdemRecord
	err := s.node.Read(ctx, func(st *fsm.State) { out = st.IdemList(prefix, after, limit) })
	return out, err
}
