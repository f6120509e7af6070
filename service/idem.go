package service

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/fsm"
)

// Idempotency keys on a node: Begin (with waiting), Complete, Abandon and
// the reads. The attempt is a lease, so its renewal is Renew.
type (
	IdemBegin    = fsm.IdemBegin
	IdemComplete = fsm.IdemComplete
	Idem         = fsm.Idem
)

// idemFallbackPoll is how often a Begin that waits looks at the key again
// if nothing woke it. The wait ends when the owning attempt's lease ends
// (completed, abandoned or lapsed), an event of the key's resource that
// wakes the waiter through the node's watch hub; the poll is only for a
// wake-up that cannot come (the watcher was cut off, or a snapshot
// replaced the history). A variable so a test can make it long
// (export_test.go).
var idemFallbackPoll = time.Second

// IdemBegin proposes cmd; if another attempt owns the key and wait > 0,
// it waits up to wait for that attempt to complete or lapse, then
// proposes again. The answer of the last Begin is returned.
func (s *Service) IdemBegin(ctx context.Context, cmd *IdemBegin, wait time.Duration) (Result, error) {
	deadline := time.Now().Add(wait)
	for {
		res, err := s.node.Propose(ctx, cmd)
		if err != nil || res.Err != nil || res.Idem().State != fsm.IdemInProgress || wait <= 0 {
			return res, err
		}
		if !s.awaitAttempt(ctx, cmd.Key, res.Idem().Token, deadline) {
			return res, ctx.Err() // still in progress at the deadline (or the caller left)
		}
	}
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
func (s *Service) IdemComplete(ctx context.Context, cmd *IdemComplete) (Result, error) {
	return s.node.Propose(ctx, cmd)
}

// IdemAbandon ends attempt (a lease) on key so the key is free at once.
// The state machine checks that the attempt is one of key's, and answers
// a retry with the same request ID as the first (fsm.IdemAbandon).
func (s *Service) IdemAbandon(ctx context.Context, key string, cmd *Release) (Result, error) {
	return s.node.Propose(ctx, &fsm.IdemAbandon{Key: key, Release: *cmd})
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
