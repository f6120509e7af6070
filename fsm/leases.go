package fsm

import (
	"crypto/subtle"
	"slices"
	"sort"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// The lease sub-state: leases by id, who holds each resource, lock-delays,
// and the waiting acquires in arrival order. Every primitive that grants
// authority builds on it: a semaphore slot, an election's leadership, an
// idempotency attempt and a group member's session are leases.

type leaseState struct {
	st          *State
	byID        cowMap[uint64, *lease]
	holders     cowMap[string, uint64]  // resource -> lease id
	blocks      cowMap[string, block]   // resources in lock-delay
	waiters     cowMap[string, *waiter] // by acquire key (Acquire.Key)
	lines       map[string][]*waiter    // resource -> its waiters in arrival order
	nextArrival uint64
	owners      names // owner -> leases held, interned (names.go)
	operations  names // operations of held leases, interned
}

func (ls *leaseState) init(s *State) {
	*ls = leaseState{st: s, byID: newCowMap[uint64, *lease](), holders: newCowMap[string, uint64](),
		blocks: newCowMap[string, block](), waiters: newCowMap[string, *waiter](),
		lines: make(map[string][]*waiter), owners: make(names), operations: make(names)}
	s.track(&ls.byID, &ls.holders, &ls.blocks, &ls.waiters)
}

func (ls *leaseState) captureInto(v *State) {
	v.leases = leaseState{st: v, byID: ls.byID.freeze(), holders: ls.holders.freeze(), blocks: ls.blocks.freeze(),
		waiters: ls.waiters.freeze(), nextArrival: ls.nextArrival}
}

func (ls *leaseState) eachCountdown(f func(Countdown)) {
	for _, l := range ls.byID.all() {
		f(leaseCountdown(l, firstDeadline(l, l.heldFor), l.heldFor))
	}
	for key, w := range ls.waiters.all() {
		f(waitCountdown(key, w.Wait))
	}
	for r, b := range ls.blocks.all() {
		f(lockDelayCountdown(r, b))
	}
}

func (*leaseState) leaseEnded(*lease) {}

type lease struct {
	leaseFields
	secretHash [32]byte
	heldFor    time.Duration // age last stamped by a leader, for MaxHold
	key        string        // the granting acquire's Key
	// attempt is the latest attempt of the acquire that made it or was
	// answered with it: only that attempt's Cancel releases it, so a
	// withdrawal by an earlier attempt's (gone) caller never undoes what a
	// retry was given.
	attempt string
	// The last renewal's key (Renew.key: its request ID scoped to its
	// caller) and answer. A retry of it gets that answer; renewals are
	// remembered here rather than in the dedup window, where thousands a
	// second would cost far more than the leases. (A retry of an older
	// renewal renews again, which is safe: the holder counts its deadline
	// from its first send.)
	renewKey       renewDigest
	renewRemaining time.Duration
}

// A waiter is an acquire waiting in line: a copy of the acquire as it
// queued (ask: a lock's, a campaign's or a semaphore's), whose shared
// fields it reads through.
type waiter struct {
	*Acquire             // ask.Base()
	ask      Ask         // the acquire as it queued
	key      string      // Acquire.Key, as it was when it queued
	sum      fingerprint // the ask's fingerprint, likewise
	arrival  uint64      // global arrival order
	queuedAt int64       // leader wall clock, display only
}

func newWaiter(ask Ask) *waiter { return &waiter{Acquire: ask.Base(), ask: ask} }

// campaign reports whether w waits to lead an election.
func (w *waiter) campaign() bool {
	_, ok := w.ask.(*Campaign)
	return ok
}

type block struct {
	token uint64 // the expired lease that caused it
	delay time.Duration
}

// An Ask is an acquire of any kind: a lock (*Acquire), a campaign for an
// election (*Campaign) or a semaphore slot (*SemAcquire). They share the
// request (Base), the dedup of retries, the waiting in arrival order and
// the grant's lease, and differ in what they check, what blocks them and
// what their grant holds (the methods below, each kind's in its file).
type Ask interface {
	Command
	// Base is the part every kind shares, a plain Acquire's fields.
	Base() *Acquire
	// sum is the fingerprint of what it asks for (request.go).
	sum(e *encoder) fingerprint
	// check applies the kind's own rules, after validateAcquire's.
	check() error
	// conflict refuses a name used as another kind (a lock on an
	// election's name, a semaphore of another limit, ...).
	conflict(ls *leaseState) error
	// blocker explains why the ask cannot be granted now (w: its waiter,
	// nil for a new request), or returns nil.
	blocker(ls *leaseState, w *waiter) error
	// take is what its grant holds: the resources, and rare with its
	// kind's fields of the lease set (a semaphore's slot and limit, an
	// election's value). (rare goes by value: a pointer through an
	// interface call would be one more allocation per grant.)
	take(ls *leaseState, rare leaseRare) ([]string, leaseRare)
	// joined and left count a waiter of the kind in and out of line.
	joined(ls *leaseState)
	left(ls *leaseState)
	// next reports whether a grant to its waiter leaves room for the
	// waiter behind it (another slot of a semaphore).
	next() bool
	// clone is the copy a waiter keeps.
	clone() Ask
}

// A lock's ask: every resource at once.

func (c *Acquire) Base() *Acquire { return c }
func (*Acquire) check() error     { return nil }

func (c *Acquire) conflict(ls *leaseState) error {
	if err := ls.st.sems.lockConflict(c.Resources); err != nil {
		return err
	}
	return ls.st.elections.conflict(c.Resources, false)
}

func (c *Acquire) blocker(ls *leaseState, w *waiter) error               { return ls.blocker(c.Resources, w) }
func (c *Acquire) take(_ *leaseState, r leaseRare) ([]string, leaseRare) { return c.Resources, r }
func (*Acquire) joined(*leaseState)                                      {}
func (*Acquire) left(*leaseState)                                        {}
func (*Acquire) next() bool                                              { return false }

func (c *Acquire) clone() Ask {
	d := *c
	return &d
}

func (ls *leaseState) acquire(ix uint64, now int64, a Ask) Result {
	s, c := ls.st, a.Base()
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := c.Key(), a.sum(&s.scratch)
	if w := ls.waiters.at(key); w != nil && key != "" {
		if !w.sum.matches(sum) {
			return Result{Err: reusedID(c.RequestID)}
		}
		w = ls.mutWaiter(w)
		w.Attempt = c.Attempt // the retry takes the place over
		return Result{Queued: true, Dup: true, ForeignSecret: w.SecretHash != c.SecretHash}
	}
	if r, ok := s.dedup.lookup(key, c.RequestID, KindAcquire, sum); ok {
		if r.Lease == nil {
			return r
		}
		l := ls.byID.at(r.Lease.ID)
		if l == nil || l.key != key {
			// Answering with a lease that has ended would let the caller
			// count a fresh deadline from its retry.
			return Result{Dup: true, Err: leasehold.Errorf(leasehold.CodeNotFound,
				"lease %d, granted to this request, has already ended", r.Lease.ID)}
		}
		r.ForeignSecret = l.secretHash != c.SecretHash
		l, _ = ls.byID.mut(l.ID)
		l.attempt = c.Attempt // the retry takes the grant over
		view := l.view()
		r.Lease = &view
		return r
	}
	var r Result
	if err := validateAcquire(c); err != nil {
		r = Result{Err: err}
	} else if err := a.check(); err != nil {
		r = Result{Err: err}
	} else if err := a.conflict(ls); err != nil {
		r = Result{Err: err}
	} else if err := ls.ownerLimit(c.Owner); err != nil {
		r = Result{Err: err}
	} else if held := a.blocker(ls, nil); held == nil {
		l := ls.grant(ix, now, a, key)
		r = Result{Lease: l, Remaining: l.TTL}
	} else if c.Wait == 0 {
		r = Result{Err: held}
	} else if err := ls.lineLimit(c.Resources); err != nil {
		r = Result{Err: err}
	} else {
		ls.enqueue(now, a, key, sum)
		r = Result{Queued: true}
	}
	s.dedup.put(key, KindAcquire, sum, now, r, s.cfg)
	if r.Queued {
		s.armWait(key, c.Wait)
		s.emitWaiter(EventQueued, c)
	}
	return r
}

// blocker explains why the resources cannot go to w (nil: a new request)
// right now, or returns nil if they can: each must be free, out of
// lock-delay, and wanted by no waiter earlier than w.
func (ls *leaseState) blocker(resources []string, w *waiter) error {
	for _, r := range resources {
		if id, held := ls.holders.get(r); held {
			l := ls.byID.at(id)
			return leasehold.Errorf(leasehold.CodeHeld,
				"resource %q is held by lease %d (owner %q, operation %q)", r, id, l.Owner, l.Operation)
		}
		if b, blocked := ls.blocks.get(r); blocked {
			return leasehold.Errorf(leasehold.CodeHeld,
				"resource %q is in a %v lock-delay after lease %d expired", r, b.delay, b.token)
		}
		if q := ls.lines[r]; len(q) > 0 && q[0] != w {
			return leasehold.Errorf(leasehold.CodeHeld,
				"resource %q has %d waiter(s) queued ahead of this request", r, len(q))
		}
	}
	return nil
}

func (ls *leaseState) ownerLimit(owner string) error {
	if max := ls.st.cfg.MaxLeasesPerOwner; max > 0 && ls.owners.count(owner) >= max {
		return leasehold.Errorf(leasehold.CodeLimit,
			"owner %q already holds %d leases (limit max_leases_per_owner)", owner, ls.owners.count(owner))
	}
	return nil
}

func (ls *leaseState) lineLimit(resources []string) error {
	max := ls.st.cfg.MaxWaitersPerResource
	for _, r := range resources {
		if max > 0 && len(ls.lines[r]) >= max {
			return leasehold.Errorf(leasehold.CodeLimit,
				"resource %q already has %d waiters (limit max_waiters_per_resource)", r, len(ls.lines[r]))
		}
	}
	return nil
}

// grant makes the lease a grants, with the entry's fencing token. The
// sub-states built on leases grant through it too (a plain *Acquire of
// their internal resource, key "").
func (ls *leaseState) grant(ix uint64, now int64, a Ask, key string) *leasehold.Lease {
	s, c := ls.st, a.Base()
	tok := s.nextToken(ix)
	rare := leaseRare{LockDelay: c.LockDelay, MaxHold: c.MaxHold, Metadata: c.Metadata}
	resources, rare := a.take(ls, rare)
	l := &lease{
		leaseFields: leaseFields{
			ID: tok, Token: tok,
			Resources: resources, Owner: ls.owners.take(c.Owner), Operation: ls.operations.take(c.Operation),
			TTL: c.TTL, acquiredAt: now, rare: rareOf(&rare),
		},
		secretHash: c.SecretHash,
		key:        key,
		attempt:    c.Attempt,
	}
	ls.byID.set(l.ID, l)
	for _, r := range resources {
		ls.holders.set(r, l.ID)
	}
	view := l.view()
	s.hooks.obs.Granted(&view, key)
	s.armLease(l, firstDeadline(l, 0), 0)
	s.emitLease(EventGranted, &view, 0)
	if l.election() {
		s.elections.granted(l)
		s.elections.emitLeader(l)
	}
	return &view
}

func (ls *leaseState) enqueue(now int64, a Ask, key string, sum fingerprint) {
	ls.nextArrival++
	w := newWaiter(a.clone())
	w.key, w.sum, w.arrival, w.queuedAt = key, sum, ls.nextArrival, now
	ls.waiters.set(key, w)
	for _, r := range w.Resources {
		ls.lines[r] = append(ls.lines[r], w)
	}
	w.ask.joined(ls)
}

// mutWaiter is w to change in place (cowMap.mut), in its lines too.
func (ls *leaseState) mutWaiter(w *waiter) *waiter {
	c, _ := ls.waiters.mut(w.key)
	if c != w {
		for _, r := range w.Resources {
			q := ls.lines[r]
			q[slices.Index(q, w)] = c
		}
	}
	return c
}

// dequeue removes w from the waiters and returns the resources whose line
// head changed.
func (ls *leaseState) dequeue(w *waiter) []string {
	ls.waiters.del(w.key)
	ls.st.disarm(waitKey(w.key))
	w.ask.left(ls)
	var heads []string
	for _, r := range w.Resources {
		q := ls.lines[r]
		i := slices.Index(q, w)
		if i < 0 {
			continue
		}
		if i == 0 {
			heads = append(heads, r)
		}
		q = slices.Delete(q, i, i+1)
		if len(q) == 0 {
			delete(ls.lines, r)
		} else {
			ls.lines[r] = q
		}
	}
	return heads
}

// wake grants, in arrival order, every waiter at the head of a line for
// one of resources that can now have all it asked for. A grant only takes
// resources, so one pass finds every waiter that became grantable.
func (ls *leaseState) wake(ix uint64, now int64, resources []string) {
	s := ls.st
	var cands []*waiter
	for _, r := range resources {
		if q := ls.lines[s.sems.wakeName(r)]; len(q) > 0 && !slices.Contains(cands, q[0]) {
			cands = append(cands, q[0])
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].arrival < cands[j].arrival })
	for i := 0; i < len(cands); i++ {
		w := cands[i]
		if w.ask.blocker(ls, w) != nil {
			continue
		}
		ls.dequeue(w)
		l := ls.grant(ix, now, w.ask, w.key)
		r := Result{Lease: l, Remaining: l.TTL}
		s.dedup.put(w.key, KindAcquire, w.sum, now, r, s.cfg)
		s.hooks.obs.WaitEnded(w.key, r)
		if q := ls.lines[w.Resources[0]]; w.ask.next() && len(q) > 0 {
			cands = append(cands, q[0])
		}
	}
}

// holderOf is the lease id, proven by the hash of its secret: a lease
// that is gone, or never was, or another's, is refused with why.
func (ls *leaseState) holderOf(id uint64, hash [32]byte, action string) (*lease, error) {
	l := ls.byID.at(id)
	if l == nil && id > ls.st.lastToken {
		return nil, leasehold.Errorf(leasehold.CodeNotFound, "lease %d was never granted", id)
	}
	if l == nil {
		return nil, leasehold.Errorf(leasehold.CodeNotFound,
			"lease %d is gone: it expired or was released", id)
	}
	if subtle.ConstantTimeCompare(l.secretHash[:], hash[:]) != 1 {
		return nil, leasehold.Errorf(leasehold.CodeNotHolder,
			"cannot %s lease %d: the secret does not match; the lease is untouched", action, id)
	}
	return l, nil
}

func (ls *leaseState) renew(now int64, c *Renew) Result {
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key := c.key()
	if r, ok := ls.st.dedup.lookup(key, c.RequestID, KindRenew, fingerprint{}); ok {
		return r // the ID was used for another kind of request
	}
	if l := ls.byID.at(c.LeaseID); l != nil && key != "" && l.renewKey == digestRenewKey(key) && l.secretHash == c.SecretHash {
		view := l.view()
		return Result{Lease: &view, Remaining: l.renewRemaining, Dup: true}
	}
	r := ls.doRenew(now, c)
	if r.Err == nil {
		l, _ := ls.byID.mut(c.LeaseID)
		l.renewKey, l.renewRemaining = digestRenewKey(key), r.Remaining
	}
	return r
}

func (ls *leaseState) doRenew(now int64, c *Renew) Result {
	s := ls.st
	if err := leasehold.ValidateName("progress", c.Progress, leasehold.MaxProgressLen, false); err != nil {
		return Result{Err: err}
	}
	l, err := ls.holderOf(c.LeaseID, c.SecretHash, "renew")
	if err != nil {
		return Result{Err: err}
	}
	remaining := l.TTL
	if maxHold := l.MaxHold(); maxHold > 0 {
		left := maxHold - max(c.Age, l.heldFor)
		if left <= 0 {
			return Result{Err: leasehold.Errorf(leasehold.CodeLimit,
				"lease %d reached its max hold of %v and cannot be renewed", l.ID, maxHold)}
		}
		remaining = min(remaining, left)
	}
	l, _ = ls.byID.mut(l.ID)
	l.heldFor = max(l.heldFor, c.Age)
	l.RenewCount++
	l.renewedAt = now
	if c.Progress != "" {
		m := l.setMore()
		m.Progress, m.progressAt = c.Progress, l.renewedAt
	}
	view := l.view()
	s.hooks.obs.Renewed(&view, remaining)
	s.armLease(l, remaining, l.heldFor)
	s.emitLease(EventRenewed, &view, 0)
	return Result{Lease: &view, Remaining: remaining}
}

func (ls *leaseState) release(ix uint64, now int64, c *Release) Result {
	s := ls.st
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := c.key(), c.sum(&s.scratch)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindRelease, sum); ok {
		return r
	}
	var r Result
	if l, err := ls.holderOf(c.LeaseID, c.SecretHash, "release"); err != nil {
		r = Result{Err: err}
	} else {
		r = Result{Lease: ls.end(l, EndReleased)}
	}
	s.dedup.put(key, KindRelease, sum, now, r, s.cfg)
	// Waiters are granted after the release's own answer is recorded, in the
	// same entry: a contended hand-off costs one commit.
	if r.Lease != nil {
		ls.wake(ix, now, r.Lease.Resources)
	}
	return r
}

// end removes a lease and frees its resources; the caller wakes waiters.
// Every sub-state then hears of it (part.leaseEnded), after the lease's
// own events.
func (ls *leaseState) end(l *lease, why EndReason) *leasehold.Lease {
	s := ls.st
	ls.byID.del(l.ID)
	ls.owners.drop(l.Owner)
	ls.operations.drop(l.Operation)
	for _, r := range l.Resources {
		if ls.holders.at(r) == l.ID {
			ls.holders.del(r)
		}
	}
	view := l.view()
	s.hooks.obs.Ended(&view, why)
	s.disarm(leaseKey(l.ID))
	s.emitLease(endEvent(why), &view, why)
	for _, p := range s.parts() {
		p.leaseEnded(l)
	}
	return &view
}

func (ls *leaseState) expire(ix uint64, now int64, c *Expire) Result {
	l := ls.byID.at(c.LeaseID)
	if l == nil || l.RenewCount != c.RenewCount {
		return Result{} // renewed or gone since the leader decided: nothing to do
	}
	view := ls.end(l, EndExpired)
	if l.LockDelay() > 0 {
		ls.block(l)
		return Result{Lease: view}
	}
	ls.wake(ix, now, l.Resources)
	return Result{Lease: view}
}

// block puts the resources of l, which ended without a clean release, in
// its lock-delay.
func (ls *leaseState) block(l *lease) {
	for _, r := range l.Resources {
		b := block{token: l.Token, delay: l.LockDelay()}
		ls.blocks.set(r, b)
		ls.st.armLockDelay(r, b)
	}
}

func (ls *leaseState) unblock(ix uint64, now int64, c *Unblock) Result {
	if b, ok := ls.blocks.get(c.Resource); ok && b.token == c.Token {
		ls.blocks.del(c.Resource)
		ls.st.disarm(lockDelayKey(c.Resource))
		ls.wake(ix, now, []string{c.Resource})
	}
	return Result{}
}

func (ls *leaseState) cancel(ix uint64, now int64, c *Cancel) Result {
	if w := ls.waiters.at(c.Key); w != nil {
		if w.Attempt != c.Attempt {
			return Result{}
		}
		r := Result{Err: leasehold.Errorf(leasehold.CodeCanceled, "the waiting acquire was canceled")}
		ls.endWait(ix, now, w, r)
		return r
	}
	// The grant may have won the race: release it, since nobody will use it.
	rec, ok := ls.st.dedup.lookup(c.Key, "", KindAcquire, fingerprint{})
	if !ok || rec.Lease == nil {
		return Result{}
	}
	l := ls.byID.at(rec.Lease.ID)
	if l == nil || l.key != c.Key || l.attempt != c.Attempt {
		return Result{}
	}
	view := ls.end(l, EndCanceled)
	ls.wake(ix, now, l.Resources)
	return Result{Lease: view}
}

func (ls *leaseState) waitTimeout(ix uint64, now int64, c *WaitTimeout) Result {
	w := ls.waiters.at(c.Key)
	if w == nil {
		return Result{}
	}
	r := Result{Err: leasehold.Errorf(leasehold.CodeWaitTimeout,
		"waited %v for %q without a grant", w.Wait, w.Resources)}
	ls.endWait(ix, now, w, r)
	return r
}

// endWait removes a waiter without granting it and lets those behind it
// move up.
func (ls *leaseState) endWait(ix uint64, now int64, w *waiter, r Result) {
	s := ls.st
	heads := ls.dequeue(w)
	s.dedup.put(w.key, KindAcquire, w.sum, now, r, s.cfg)
	s.hooks.obs.WaitEnded(w.key, r)
	s.emitWaiter(EventWithdrawn, w.Acquire)
	ls.wake(ix, now, heads)
}

func validateAcquire(c *Acquire) error {
	if err := leasehold.ValidateResources(c.Resources); err != nil {
		return err
	}
	if err := leasehold.ValidateName("owner", c.Owner, leasehold.MaxOwnerLen, false); err != nil {
		return err
	}
	if err := leasehold.ValidateName("operation", c.Operation, leasehold.MaxOperationLen, false); err != nil {
		return err
	}
	if err := leasehold.ValidateMetadata(c.Metadata); err != nil {
		return err
	}
	if err := leasehold.ValidateDuration("ttl", c.TTL, leasehold.MinTTL, leasehold.MaxTTL); err != nil {
		return err
	}
	if err := leasehold.ValidateDuration("wait", c.Wait, 0, leasehold.MaxWait); err != nil {
		return err
	}
	if err := leasehold.ValidateDuration("lock_delay", c.LockDelay, 0, leasehold.MaxLockDelay); err != nil {
		return err
	}
	if c.Wait > 0 && c.RequestID == "" {
		return leasehold.Errorf(leasehold.CodeInvalid, "a waiting acquire needs a request_id")
	}
	if c.MaxHold != 0 {
		if err := leasehold.ValidateDuration("max_hold", c.MaxHold, c.TTL, leasehold.MaxMaxHold); err != nil {
			return err
		}
	}
	return nil
}
