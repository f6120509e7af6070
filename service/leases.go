package service

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/fsm"
)

// cancelTimeout bounds the Cancel the service proposes when a waiting
// caller goes away.
const cancelTimeout = 5 * time.Second

// WithdrawGrace is how long a caller that went away has to come back
// (retrying the same request ID, say after a broken connection) before its
// place in line, or a grant nobody took, is given up.
const WithdrawGrace = 2 * time.Second

// AcquireRequest asks for every resource at once, as the front checked
// it. A request is one receipt of a call: the service builds its command
// on first use (the caller of that call's context, an attempt of its
// own), and the request's follow-ups (HoldPlace, LeftEarly, the Acquire
// that waits for a place a Batch took) reuse it.
type AcquireRequest struct {
	Resources []string
	Owner     string
	Operation string
	Metadata  map[string]string
	TTL       time.Duration
	// Wait > 0 queues the acquire for up to Wait if it cannot be granted
	// now.
	Wait      time.Duration
	LockDelay time.Duration
	MaxHold   time.Duration
	// Limit > 0 makes it a semaphore acquire: one of Limit slots of the
	// one resource named.
	Limit int
	// RequestID makes a retry safe; with SecretHash and the caller it
	// names the request (a retry finds its first answer).
	RequestID  string
	SecretHash [32]byte

	cmd fsm.Ask // built on first use
}

// command is req's command, built for the caller of ctx on first use: a
// lock's acquire, or with a limit a semaphore's.
func (req *AcquireRequest) command(ctx context.Context) fsm.Ask {
	if req.cmd == nil {
		a := fsm.Acquire{RequestID: req.RequestID, Resources: req.Resources, Owner: req.Owner,
			Operation: req.Operation, TTL: req.TTL, Wait: req.Wait, LockDelay: req.LockDelay, MaxHold: req.MaxHold,
			Metadata: req.Metadata, SecretHash: req.SecretHash, Caller: CallerOf(ctx).Name, Attempt: randomHex(8)}
		if req.Limit > 0 {
			req.cmd = &fsm.SemAcquire{Acquire: a, Limit: req.Limit}
		} else {
			req.cmd = &a
		}
	}
	return req.cmd
}

// RenewRequest extends a lease by its TTL, proven by its secret's hash;
// Progress is the holder's note.
type RenewRequest struct {
	LeaseID    uint64
	SecretHash [32]byte
	Progress   string
	RequestID  string
}

func (req *RenewRequest) command(ctx context.Context) *fsm.Renew {
	return &fsm.Renew{RequestID: req.RequestID, LeaseID: req.LeaseID, SecretHash: req.SecretHash, Progress: req.Progress,
		Caller: CallerOf(ctx).Name}
}

// ReleaseRequest ends a lease, proven by its secret's hash.
type ReleaseRequest struct {
	LeaseID    uint64
	SecretHash [32]byte
	RequestID  string
}

func (req *ReleaseRequest) command(ctx context.Context) *fsm.Release {
	return &fsm.Release{RequestID: req.RequestID, LeaseID: req.LeaseID, SecretHash: req.SecretHash, Caller: CallerOf(ctx).Name}
}

// Grant is what an acquire, a renewal or a release answers (and a
// campaign, a proclamation or a forced release, which are theirs).
type Grant struct {
	// Lease is the lease granted, renewed or released; nil for an
	// acquire that queued.
	Lease *leasehold.Lease
	// Remaining is how long the lease now runs (acquire, renew).
	Remaining time.Duration
	// Queued: a Batch's acquire took its place in line.
	Queued bool
	// ForeignSecret marks a retried acquire whose secret differs from the
	// first request's (or can no longer be checked): the caller does not
	// know the lease's secret, so the answer must not claim it does.
	ForeignSecret bool
	// Dup: a retry, answered as its first request was.
	Dup bool
}

func grantOf(r fsm.Result) Grant {
	return Grant{Lease: r.Lease, Remaining: r.Remaining, Queued: r.Queued, ForeignSecret: r.ForeignSecret, Dup: r.Dup}
}

// answer is r as a method's answer: the state machine's refusal (r.Err)
// is the error, as a failure to commit is.
func answer(r fsm.Result, err error) (Grant, error) {
	if err == nil {
		err = r.Err
	}
	return grantOf(r), err
}

// LeaseOp is one operation of a Batch: exactly one of its fields is set.
type LeaseOp struct {
	Acquire *AcquireRequest
	Renew   *RenewRequest
	Release *ReleaseRequest
}

// LeaseResult is one operation's answer in a Batch: a grant, or the state
// machine's refusal of it alone.
type LeaseResult struct {
	Grant
	Err error
}

// Acquire proposes req and, if it queues, waits for its outcome. A caller
// that goes away withdraws its place in the queue; a grant that raced the
// withdrawal is released by it. A retried request's remaining time is
// capped by the leader's countdown now.
func (s *Service) Acquire(ctx context.Context, req *AcquireRequest) (Grant, error) {
	cmd := req.command(ctx)
	return answer(s.take(ctx, cmd.Base(), cmd))
}

// take proposes proposal (cmd itself, or a command that is cmd in every
// way but its kind, such as a Campaign) and waits for it as Acquire does.
func (s *Service) take(ctx context.Context, cmd *fsm.Acquire, proposal fsm.Command) (fsm.Result, error) {
	res, err := s.acquire(ctx, cmd, proposal)
	if err == nil && res.Err == nil && res.Dup && res.Lease != nil {
		res.Remaining = s.remainingNow(res.Lease.ID, res.Remaining)
	}
	return res, err
}

func (s *Service) acquire(ctx context.Context, cmd *fsm.Acquire, proposal fsm.Command) (fsm.Result, error) {
	var outcome <-chan fsm.Result
	var res fsm.Result
	var err error
	claimed := false
	if cmd.Wait > 0 {
		var stop func()
		key := cmd.Key()
		outcome, stop = s.node.Watch(key)
		defer stop()
		// A place in line a Batch took here, whose caller now waits for
		// it: wait for it as the attempt that took it, without another log
		// entry. Watching first means no grant is missed. If the place was
		// granted before the caller came back (the release's entry granted
		// it), answer from that grant, also without an entry: a hand-off
		// costs the release's entry alone. (The key is scoped to the
		// caller and secret, so only the same caller finds it; a place
		// held by no Batch here is taken over by proposing the acquire
		// again, as a retry.)
		if attempt, _, ok := s.node.Queued(key); ok && s.places.claim(key) {
			cmd.Attempt, claimed = attempt, true
			res = fsm.Result{Queued: true, Dup: true}
		} else if granted, attempt, ok := s.node.GrantOf(key); ok && s.places.claim(key) {
			cmd.Attempt, claimed = attempt, true
			res = granted
		}
	}
	if !claimed {
		var rs []fsm.Result
		if rs, err = s.propose(ctx, []fsm.Command{proposal}); err == nil {
			res = rs[0]
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			// The caller left while the acquire was being committed: it may
			// have queued, or been granted, with nobody to take the answer.
			return res, s.leftEarly(ctx, cmd)
		}
		return res, err
	}
	if !res.Queued {
		if ctx.Err() != nil && res.Lease != nil {
			return fsm.Result{}, s.leftEarly(ctx, cmd) // granted as the caller left
		}
		return res, nil
	}
	foreign := res.ForeignSecret
	// The leader's timer ends the wait; the extra second only covers a
	// leader change, after which the new leader's timer takes over.
	fallback := time.NewTimer(cmd.Wait + time.Second)
	defer fallback.Stop()
	select {
	case r := <-outcome:
		if ctx.Err() != nil && r.Lease != nil {
			// Granted as the caller left: nobody will take this answer.
			return fsm.Result{}, s.leftEarly(ctx, cmd)
		}
		r.ForeignSecret = r.ForeignSecret || foreign
		return r, nil
	case <-ctx.Done():
		return fsm.Result{}, s.leftEarly(ctx, cmd)
	case <-fallback.C:
		go s.withdraw(0, cmd)
		return fsm.Result{}, leasehold.Errorf(leasehold.CodeWaitTimeout, "waited %v for %q without a grant", cmd.Wait, cmd.Resources)
	}
}

// LeftEarly answers for acquires whose caller's context ended first (one,
// or those of a batch). On shutdown the attempts stay, and the caller is
// told to retry elsewhere; otherwise they are withdrawn after the grace
// period, unless a retry takes them over first.
func (s *Service) LeftEarly(ctx context.Context, reqs ...*AcquireRequest) error {
	var cmds []*fsm.Acquire
	for _, r := range reqs {
		if r.cmd != nil { // proposed: there is an attempt to withdraw
			cmds = append(cmds, r.cmd.Base())
		}
	}
	return s.leftEarly(ctx, cmds...)
}

func (s *Service) leftEarly(ctx context.Context, cmds ...*fsm.Acquire) error {
	if s.stopping.Err() != nil {
		return leasehold.Errorf(leasehold.CodeUnavailable,
			"this node is shutting down; retry the acquire with the same request_id on another node")
	}
	if len(cmds) > 0 {
		go s.withdraw(WithdrawGrace, cmds...)
	}
	return ctx.Err()
}

// withdraw cancels attempts of acquires after grace, in one log entry:
// their places in line, or the grants they got with nobody to take them.
// A retry's waiter or grant is never touched (each Cancel is scoped to its
// attempt).
func (s *Service) withdraw(grace time.Duration, cmds ...*fsm.Acquire) {
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.stopping.Done():
			return // shutting down: the leader's wait timer ends it
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	cancels := make([]fsm.Command, len(cmds))
	for i, c := range cmds {
		cancels[i] = &fsm.Cancel{Key: c.Key(), Attempt: c.Attempt}
	}
	results, err := s.node.ProposeAll(ctx, cancels)
	if err != nil {
		s.log.Warn("could not withdraw a waiting acquire; the leader's wait timer will end it", "count", len(cmds), "err", err)
		return
	}
	for i, res := range results {
		if res.Lease != nil {
			s.log.Info("released a grant whose caller went away", "lease", res.Lease.ID, "request_id", cmds[i].RequestID)
		}
	}
}

// HoldPlace keeps the place in line req took (in a Batch) for its
// caller's follow-up Acquire, and withdraws it if none comes within
// WithdrawGrace.
func (s *Service) HoldPlace(req *AcquireRequest) {
	if req.cmd == nil {
		return // never proposed: no place to hold
	}
	cmd := req.cmd.Base()
	s.places.hold(cmd, WithdrawGrace, func() {
		if s.stopping.Err() == nil { // shutting down: the leader's wait timer ends it
			s.withdraw(0, cmd)
		}
	})
}

// Renew renews a lease, stamped with the age the leader counts for it (for
// MaxHold).
func (s *Service) Renew(ctx context.Context, req *RenewRequest) (Grant, error) {
	cmd := req.command(ctx)
	cmd.Age = s.node.LeaseAge(cmd.LeaseID)
	res, err := s.node.Propose(ctx, cmd)
	if err == nil && res.Err == nil && res.Dup && res.Lease != nil {
		res.Remaining = s.remainingNow(res.Lease.ID, res.Remaining)
	}
	return answer(res, err)
}

// Release ends a lease.
func (s *Service) Release(ctx context.Context, req *ReleaseRequest) (Grant, error) {
	return answer(s.node.Propose(ctx, req.command(ctx)))
}

// Batch proposes acquires, renewals and releases in one log entry, renewals
// stamped as Renew stamps them, retried answers capped as Acquire and Renew
// cap them. Queued acquires are the caller's to hold (HoldPlace) or
// withdraw (LeftEarly).
func (s *Service) Batch(ctx context.Context, ops []LeaseOp) ([]LeaseResult, error) {
	cmds := make([]fsm.Command, len(ops))
	for i, op := range ops {
		switch {
		case op.Acquire != nil:
			cmds[i] = op.Acquire.command(ctx)
		case op.Renew != nil:
			r := op.Renew.command(ctx)
			r.Age = s.node.LeaseAge(r.LeaseID)
			cmds[i] = r
		case op.Release != nil:
			cmds[i] = op.Release.command(ctx)
		default:
			return nil, leasehold.Errorf(leasehold.CodeInvalid, "operation %d of the batch sets none of acquire, renew or release", i)
		}
	}
	results, err := s.propose(ctx, cmds)
	if err != nil {
		return nil, err
	}
	out := make([]LeaseResult, len(results))
	for i := range results {
		if res := &results[i]; res.Err == nil && res.Dup && res.Lease != nil && ops[i].Release == nil {
			res.Remaining = s.remainingNow(res.Lease.ID, res.Remaining)
		}
		out[i] = LeaseResult{Grant: grantOf(results[i]), Err: results[i].Err}
	}
	return out, nil
}

// propose commits cmds in one log entry. Acquires that will all wait in
// line ride behind (cluster.Node.ProposeBehind): in a contended hand-off
// they share the entry of the release that is coming, rather than take a
// commit ahead of it.
func (s *Service) propose(ctx context.Context, cmds []fsm.Command) ([]fsm.Result, error) {
	if willWait(s.node, cmds) {
		return s.node.ProposeBehind(ctx, cmds)
	}
	return s.node.ProposeAll(ctx, cmds)
}

func willWait(node *cluster.Node, cmds []fsm.Command) bool {
	for _, c := range cmds {
		ask, ok := c.(fsm.Ask) // a lock's, a semaphore's or a campaign's
		if !ok {
			return false
		}
		if a := ask.Base(); a.Wait == 0 || !node.Contended(a.Resources) {
			return false
		}
	}
	return len(cmds) > 0
}

// remainingNow caps a retried request's first answer by what is left on
// the leader's countdown now, since the caller counts from its retry. When
// the countdown is unknown it answers 0, and the client renews at once.
func (s *Service) remainingNow(id uint64, first time.Duration) time.Duration {
	if d, ok := s.node.ExpiresIn(id); ok {
		return min(first, d)
	}
	return 0
}

// expiresIn is what is left of a lease on the leader's countdown, or -1
// if this node does not know it.
func (s *Service) expiresIn(id uint64) time.Duration {
	if d, ok := s.node.ExpiresIn(id); ok {
		return d
	}
	return -1
}
