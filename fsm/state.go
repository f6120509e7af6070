// Package fsm is leasehold's deterministic state machine: leases and
// semaphores with their waiters and lock-delays, the fenced key-value
// space and its transactions, elections, idempotency keys, keyed queues,
// partition groups, the audit log and request deduplication. Each command
// has one row in the command table (registry.go); each area writes its own
// snapshot section (snapshot.go); every change is reported as an event
// (events.go) and every deadline as a countdown for the leader to keep
// (countdown.go). It reads no clock, makes no random choice and does no
// I/O; time, ids and secret hashes arrive inside commands. Replaying the
// same log gives the same state, byte for byte. The vocabulary the state
// answers in (leases, items, deliveries, groups...) is package leasehold's.
//
// A State is not safe for concurrent use: the caller serialises Apply,
// Capture and Release and guards reads; a capture is then encoded apart
// (capture.go).
package fsm

import (
	"crypto/subtle"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// EndReason says why a lease ended.
type EndReason uint8

const (
	EndReleased EndReason = iota + 1
	EndExpired
	EndCanceled // a waiter's grant released because its requester went away
	EndForced   // an operator forced the release
)

func (r EndReason) String() string {
	switch r {
	case EndReleased:
		return "released"
	case EndExpired:
		return "expired"
	case EndCanceled:
		return "canceled"
	case EndForced:
		return "forced"
	}
	return "unknown"
}

// Observer hears about every change as it is applied, in log order. The
// node uses it for metrics and to wake waiting requests (its leader
// timers hear of countdowns: Countdowns). Calls happen inside Apply, so
// they must be quick and must not call back into State.
//
// A waiting acquire is named by its key (Acquire.Key), which the node
// treats as an opaque string.
type Observer interface {
	Granted(l *leasehold.Lease, key string)
	Renewed(l *leasehold.Lease, remaining time.Duration)
	Ended(l *leasehold.Lease, why EndReason)
	WaitEnded(key string, r Result)
}

// Result is the answer to one command. Exactly one of Err, Lease or Queued
// is meaningful.
type Result struct {
	Err       error            // a *leasehold.Error
	Lease     *leasehold.Lease // the lease granted, renewed or released
	Queued    bool             // the acquire waits; WaitEnded brings the outcome
	Remaining time.Duration    // renew and acquire: how long the lease now runs
	Version   uint64           // put, txn: the key's new version; delete: its last
	Txn       *TxnResult       // txn: the branch that ran and its versions
	Dup       bool             // answered from the dedup window
	Idem      *Idem            // idempotency Begin and Complete: where the key stands (idem.go)
	Queue     *QueueResult     // queue commands: sequences, deliveries, counts (queue.go)
	Group     *GroupInfo       // group commands: the group, and a Join's partitions (groups.go)
	Barrier   *BarrierResult   // barrier commands: the barrier, the phase acted in and its end (barrier.go)
	// ForeignSecret marks a retried acquire whose secret differs from the
	// first request's (or can no longer be checked): the caller does not
	// know the lease's secret, so the answer must not claim it does.
	ForeignSecret bool
}

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

type waiter struct {
	Acquire
	key      string      // Acquire.Key, as it was when it queued
	sum      fingerprint // Acquire.sum, likewise
	arrival  uint64      // global arrival order
	queuedAt int64       // leader wall clock, display only
}

type block struct {
	token uint64 // the expired lease that caused it
	delay time.Duration
}

// Config bounds the state machine's memory. Every node must use the same
// values, since they change what Apply does.
type Config struct {
	DedupWindow time.Duration // how long a request ID is remembered
	DedupMax    int           // most request IDs remembered at once
	AuditMax    int           // most audit records kept (oldest go first)
	// MaxWaitersPerResource refuses an acquire that would queue behind that
	// many others on one resource (0: no limit).
	MaxWaitersPerResource int
	// MaxLeasesPerOwner refuses a grant to an owner already holding that
	// many leases (0: no limit).
	MaxLeasesPerOwner int
	// A transaction may carry at most MaxTxnCompares compares, MaxTxnOps
	// operations per branch and MaxTxnBytes of values in all (0: no limit).
	MaxTxnCompares int
	MaxTxnOps      int
	MaxTxnBytes    int

	// Idempotency keys (idem.go): the retention of a completed result when
	// Begin names none and the most it may name; the largest result; the
	// most keys per prefix and bytes of results in all (0: no limit).
	IdemRetention        time.Duration
	MaxIdemRetention     time.Duration
	MaxIdemResult        int
	MaxIdemKeysPerPrefix int
	MaxIdemBytes         int

	// MaxQueueBytes is the budget for message bodies in all queues (0: no
	// limit); a Send past it is refused, never an accepted message dropped.
	MaxQueueBytes int
	// MaxQueueDedupIDs bounds the dedup ids one queue remembers within
	// its window (0: no limit).
	MaxQueueDedupIDs int
}

// DefaultConfig is what a node uses unless told otherwise.
func DefaultConfig() Config {
	return Config{DedupWindow: 5 * time.Minute, DedupMax: 1 << 20, AuditMax: 10000,
		MaxWaitersPerResource: 1000, MaxLeasesPerOwner: 100000,
		MaxTxnCompares: leasehold.MaxTxnCompares, MaxTxnOps: leasehold.MaxTxnOps, MaxTxnBytes: leasehold.MaxTxnBytes,
		IdemRetention: 24 * time.Hour, MaxIdemRetention: 7 * 24 * time.Hour, MaxIdemResult: 64 << 10,
		MaxIdemKeysPerPrefix: 1 << 20, MaxIdemBytes: 1 << 30, MaxQueueBytes: 1 << 30, MaxQueueDedupIDs: 1 << 20}
}

// State is the whole replicated state.
type State struct {
	cfg          Config
	obs          Observer
	sink         EventSink  // obs, if it wants events; else nil
	timers       Countdowns // obs, if it times countdowns (countdown.go); else nil
	lastIndex    uint64
	lastToken    uint64
	nextArrival  uint64
	leases       cowMap[uint64, *lease]
	holders      cowMap[string, uint64]  // resource -> lease id
	blocks       cowMap[string, block]   // resources in lock-delay
	waiters      cowMap[string, *waiter] // by acquire key (Acquire.Key)
	queues       map[string][]*waiter    // resource -> waiters in arrival order
	dedup        dedup
	kv           cowMap[string, Item]
	bound        map[uint64]map[string]struct{} // lease -> keys bound to it
	kvBytes      int
	audit        []AuditRecord
	owners       names                       // owner -> leases held, interned (names.go)
	operations   names                       // operations of held leases, interned
	vacated      []string                    // elections whose leader ended in this command (elections.go)
	led          map[string]struct{}         // elections with a leader: the resources held by an election lease (elections.go)
	idem         cowMap[string, *idemRecord] // idempotency keys (idem.go)
	idemCount    map[string]int              // key prefix -> records
	idemBytes    int                         // bytes of stored results
	queuesByName cowMap[string, *queue]      // keyed queues (queue.go)
	queueBytes   int                         // bytes of message bodies in all queues
	groups       cowMap[string, *group]      // partition groups (groups.go)
	now          int64                       // the time of the entry being applied
	sems         cowMap[string, *semaphore]  // names in use as semaphores (semaphore.go)
	barriers     barriers                    // barriers and latches (barrier.go)
	// capture is the snapshot that holds the maps frozen, if any, and
	// captures the count of those not yet released (capture.go).
	capture  *capture
	captures atomic.Int32

	scratch  encoder      // a buffer for fingerprints (request.go); not state
	snapSize atomic.Int64 // the last snapshot's size, to size the next one's buffer; not state
}

// New returns an empty state. obs may be nil.
func New(cfg Config, obs Observer) *State {
	if obs == nil {
		obs = nopObserver{}
	}
	s := &State{
		cfg:          cfg,
		obs:          obs,
		leases:       newCowMap[uint64, *lease](),
		holders:      newCowMap[string, uint64](),
		blocks:       newCowMap[string, block](),
		waiters:      newCowMap[string, *waiter](),
		queues:       make(map[string][]*waiter),
		dedup:        newDedup(),
		kv:           newCowMap[string, Item](),
		bound:        make(map[uint64]map[string]struct{}),
		owners:       make(names),
		operations:   make(names),
		idem:         newCowMap[string, *idemRecord](),
		idemCount:    make(map[string]int),
		led:          make(map[string]struct{}),
		queuesByName: newCowMap[string, *queue](),
		groups:       newCowMap[string, *group](),
		sems:         newCowMap[string, *semaphore](),
		barriers:     newBarriers(),
	}
	s.setSink(obs)
	return s
}

// SetObserver replaces the observer (after a restore, for instance).
func (s *State) SetObserver(obs Observer) {
	if obs == nil {
		obs = nopObserver{}
	}
	s.obs = obs
	s.setSink(obs)
}

// LastIndex is the log index of the last applied entry.
func (s *State) LastIndex() uint64 { return s.lastIndex }

// LastToken is the largest fencing token ever issued.
func (s *State) LastToken() uint64 { return s.lastToken }

// Apply applies one log entry and returns one result per command.
func (s *State) Apply(index uint64, b *Batch) []Result {
	s.thaw()
	s.lastIndex, s.now = index, b.Time
	s.dedup.evict(b.Time, s.cfg)
	out := make([]Result, len(b.Cmds))
	for i, c := range b.Cmds {
		out[i] = c.apply(s, index, b.Time)
		if len(s.vacated) > 0 {
			s.flushVacated()
		}
	}
	return out
}

// nextToken makes the fencing token for a grant in the entry at index ix:
// the index itself, or one past the last token if a grant earlier in the
// same entry took it. Tokens strictly increase across the whole log.
func (s *State) nextToken(ix uint64) uint64 {
	t := max(ix, s.lastToken+1)
	s.lastToken = t
	return t
}

func (s *State) acquire(ix uint64, now int64, c *Acquire) Result {
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := c.Key(), c.sum(&s.scratch)
	if w := s.waiters.at(key); w != nil && key != "" {
		if !w.sum.matches(sum) {
			return Result{Err: reusedID(c.RequestID)}
		}
		w = s.mutWaiter(w)
		w.Attempt = c.Attempt // the retry takes the place over
		return Result{Queued: true, Dup: true, ForeignSecret: w.SecretHash != c.SecretHash}
	}
	if r, ok := s.dedup.lookup(key, c.RequestID, KindAcquire, sum); ok {
		if r.Lease == nil {
			return r
		}
		l := s.leases.at(r.Lease.ID)
		if l == nil || l.key != key {
			// Answering with a lease that has ended would let the caller
			// count a fresh deadline from its retry.
			return Result{Dup: true, Err: leasehold.Errorf(leasehold.CodeNotFound,
				"lease %d, granted to this request, has already ended", r.Lease.ID)}
		}
		r.ForeignSecret = l.secretHash != c.SecretHash
		l, _ = s.leases.mut(l.ID)
		l.attempt = c.Attempt // the retry takes the grant over
		view := l.view()
		r.Lease = &view
		return r
	}
	var r Result
	if err := validateAcquire(c); err != nil {
		r = Result{Err: err}
	} else if err := validateCampaign(c); err != nil {
		r = Result{Err: err}
	} else if err := validateSemaphore(c); err != nil {
		r = Result{Err: err}
	} else if err := s.semConflict(c); err != nil {
		r = Result{Err: err}
	} else if err := s.kindConflict(c); err != nil {
		r = Result{Err: err}
	} else if err := s.ownerLimit(c.Owner); err != nil {
		r = Result{Err: err}
	} else if held := s.blockerOf(c, nil); held == nil {
		l := s.grant(ix, now, c, key)
		r = Result{Lease: l, Remaining: l.TTL}
	} else if c.Wait == 0 {
		r = Result{Err: held}
	} else if err := s.queueLimit(c.Resources); err != nil {
		r = Result{Err: err}
	} else {
		s.enqueue(now, c, key, sum)
		r = Result{Queued: true}
	}
	s.dedup.put(key, KindAcquire, sum, now, r, s.cfg)
	if r.Queued {
		s.armWait(key, c.Wait)
		s.emitWaiter(EventQueued, c)
	}
	return r
}

// blockerOf is blocker for the acquire c, a lock's or a semaphore's.
func (s *State) blockerOf(c *Acquire, w *waiter) error {
	if c.Limit > 0 {
		return s.semBlocker(c.Resources[0], c.Limit, w)
	}
	return s.blocker(c.Resources, w)
}

// blocker explains why the resources cannot go to w (nil: a new request)
// right now, or returns nil if they can: each must be free, out of
// lock-delay, and wanted by no waiter earlier than w.
func (s *State) blocker(resources []string, w *waiter) error {
	for _, r := range resources {
		if id, held := s.holders.get(r); held {
			l := s.leases.at(id)
			return leasehold.Errorf(leasehold.CodeHeld,
				"resource %q is held by lease %d (owner %q, operation %q)", r, id, l.Owner, l.Operation)
		}
		if b, blocked := s.blocks.get(r); blocked {
			return leasehold.Errorf(leasehold.CodeHeld,
				"resource %q is in a %v lock-delay after lease %d expired", r, b.delay, b.token)
		}
		if q := s.queues[r]; len(q) > 0 && q[0] != w {
			return leasehold.Errorf(leasehold.CodeHeld,
				"resource %q has %d waiter(s) queued ahead of this request", r, len(q))
		}
	}
	return nil
}

func (s *State) ownerLimit(owner string) error {
	if max := s.cfg.MaxLeasesPerOwner; max > 0 && s.owners.count(owner) >= max {
		return leasehold.Errorf(leasehold.CodeLimit,
			"owner %q already holds %d leases (limit max_leases_per_owner)", owner, s.owners.count(owner))
	}
	return nil
}

func (s *State) queueLimit(resources []string) error {
	max := s.cfg.MaxWaitersPerResource
	for _, r := range resources {
		if max > 0 && len(s.queues[r]) >= max {
			return leasehold.Errorf(leasehold.CodeLimit,
				"resource %q already has %d waiters (limit max_waiters_per_resource)", r, len(s.queues[r]))
		}
	}
	return nil
}

func (s *State) grant(ix uint64, now int64, c *Acquire, key string) *leasehold.Lease {
	tok := s.nextToken(ix)
	resources := c.Resources
	if c.Limit > 0 {
		name := c.Resources[0]
		i := s.freeSlot(name, c.Limit)
		resources = []string{leasehold.SlotName(name, i)}
		s.semJoin(name, c.Limit)
		s.semTake(name, i)
	}
	rare := leaseRare{LockDelay: c.LockDelay, MaxHold: c.MaxHold, Metadata: c.Metadata,
		election: c.Election, value: c.Value}
	if c.Limit > 0 {
		rare.Semaphore, rare.Limit = c.Resources[0], c.Limit
	}
	l := &lease{
		leaseFields: leaseFields{
			ID: tok, Token: tok,
			Resources: resources, Owner: s.owners.take(c.Owner), Operation: s.operations.take(c.Operation),
			TTL: c.TTL, acquiredAt: now, rare: rareOf(&rare),
		},
		secretHash: c.SecretHash,
		key:        key,
		attempt:    c.Attempt,
	}
	s.leases.set(l.ID, l)
	for _, r := range resources {
		s.holders.set(r, l.ID)
	}
	view := l.view()
	s.obs.Granted(&view, key)
	s.armLease(l, firstDeadline(l, 0), 0)
	s.emitLease(EventGranted, &view, 0)
	if l.election() {
		s.led[l.Resources[0]] = struct{}{}
		s.emitLeader(l)
	}
	return &view
}

func (s *State) enqueue(now int64, c *Acquire, key string, sum fingerprint) {
	s.nextArrival++
	w := &waiter{Acquire: *c, key: key, sum: sum, arrival: s.nextArrival, queuedAt: now}
	s.waiters.set(key, w)
	for _, r := range c.Resources {
		s.queues[r] = append(s.queues[r], w)
	}
	if c.Limit > 0 {
		s.semJoin(c.Resources[0], c.Limit)
	}
}

// mutWaiter is w to change in place (cowMap.mut), in its queues too.
func (s *State) mutWaiter(w *waiter) *waiter {
	c, _ := s.waiters.mut(w.key)
	if c != w {
		for _, r := range w.Resources {
			q := s.queues[r]
			q[slices.Index(q, w)] = c
		}
	}
	return c
}

// dequeue removes w from the waiters and returns the resources whose queue
// head changed.
func (s *State) dequeue(w *waiter) []string {
	s.waiters.del(w.key)
	s.disarm(waitKey(w.key))
	if w.Limit > 0 {
		s.semLeave(w.Resources[0])
	}
	var heads []string
	for _, r := range w.Resources {
		q := s.queues[r]
		i := slices.Index(q, w)
		if i < 0 {
			continue
		}
		if i == 0 {
			heads = append(heads, r)
		}
		q = slices.Delete(q, i, i+1)
		if len(q) == 0 {
			delete(s.queues, r)
		} else {
			s.queues[r] = q
		}
	}
	return heads
}

// wake grants, in arrival order, every waiter at the head of a queue for
// one of resources that can now have all it asked for. A grant only takes
// resources, so one pass finds every waiter that became grantable.
func (s *State) wake(ix uint64, now int64, resources []string) {
	var cands []*waiter
	for _, r := range resources {
		if q := s.queues[s.wakeName(r)]; len(q) > 0 && !slices.Contains(cands, q[0]) {
			cands = append(cands, q[0])
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].arrival < cands[j].arrival })
	for i := 0; i < len(cands); i++ {
		w := cands[i]
		if s.blockerOf(&w.Acquire, w) != nil {
			continue
		}
		s.dequeue(w)
		l := s.grant(ix, now, &w.Acquire, w.key)
		r := Result{Lease: l, Remaining: l.TTL}
		s.dedup.put(w.key, KindAcquire, w.sum, now, r, s.cfg)
		s.obs.WaitEnded(w.key, r)
		// A semaphore's next waiter may fit in another free slot.
		if q := s.queues[w.Resources[0]]; w.Limit > 0 && len(q) > 0 {
			cands = append(cands, q[0])
		}
	}
}

func (s *State) holderOf(id uint64, hash [32]byte, action string) (*lease, error) {
	l := s.leases.at(id)
	if l == nil && id > s.lastToken {
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

func (s *State) renew(now int64, c *Renew) Result {
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key := c.key()
	if r, ok := s.dedup.lookup(key, c.RequestID, KindRenew, fingerprint{}); ok {
		return r // the ID was used for another kind of request
	}
	if l := s.leases.at(c.LeaseID); l != nil && key != "" && l.renewKey == digestRenewKey(key) && l.secretHash == c.SecretHash {
		view := l.view()
		return Result{Lease: &view, Remaining: l.renewRemaining, Dup: true}
	}
	r := s.doRenew(now, c)
	if r.Err == nil {
		l, _ := s.leases.mut(c.LeaseID)
		l.renewKey, l.renewRemaining = digestRenewKey(key), r.Remaining
	}
	return r
}

func (s *State) doRenew(now int64, c *Renew) Result {
	if err := leasehold.ValidateName("progress", c.Progress, leasehold.MaxProgressLen, false); err != nil {
		return Result{Err: err}
	}
	l, err := s.holderOf(c.LeaseID, c.SecretHash, "renew")
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
	l, _ = s.leases.mut(l.ID)
	l.heldFor = max(l.heldFor, c.Age)
	l.RenewCount++
	l.renewedAt = now
	if c.Progress != "" {
		m := l.setMore()
		m.Progress, m.progressAt = c.Progress, l.renewedAt
	}
	view := l.view()
	s.obs.Renewed(&view, remaining)
	s.armLease(l, remaining, l.heldFor)
	s.emitLease(EventRenewed, &view, 0)
	return Result{Lease: &view, Remaining: remaining}
}

func (s *State) release(ix uint64, now int64, c *Release) Result {
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := c.key(), c.sum(&s.scratch)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindRelease, sum); ok {
		return r
	}
	var r Result
	if l, err := s.holderOf(c.LeaseID, c.SecretHash, "release"); err != nil {
		r = Result{Err: err}
	} else {
		r = Result{Lease: s.end(l, EndReleased)}
	}
	s.dedup.put(key, KindRelease, sum, now, r, s.cfg)
	// Waiters are granted after the release's own answer is recorded, in the
	// same entry: a contended hand-off costs one commit.
	if r.Lease != nil {
		s.wake(ix, now, r.Lease.Resources)
	}
	return r
}

// end removes a lease and frees its resources; the caller wakes waiters.
func (s *State) end(l *lease, why EndReason) *leasehold.Lease {
	s.leases.del(l.ID)
	s.owners.drop(l.Owner)
	s.operations.drop(l.Operation)
	for _, r := range l.Resources {
		if s.holders.at(r) == l.ID {
			s.holders.del(r)
		}
	}
	if l.Semaphore() != "" {
		s.semFree(l)
	}
	view := l.view()
	s.obs.Ended(&view, why)
	s.disarm(leaseKey(l.ID))
	s.emitLease(endEvent(why), &view, why)
	s.dropBound(l.ID)
	if l.election() {
		if id, held := s.holders.get(l.Resources[0]); !held || !s.leases.at(id).election() {
			delete(s.led, l.Resources[0])
		}
		s.vacated = append(s.vacated, l.Resources[0])
	}
	s.idemEnded(l)
	s.groupMemberEnded(l)
	s.barrierEnded(l)
	return &view
}

func (s *State) expire(ix uint64, now int64, c *Expire) Result {
	l := s.leases.at(c.LeaseID)
	if l == nil || l.RenewCount != c.RenewCount {
		return Result{} // renewed or gone since the leader decided: nothing to do
	}
	view := s.end(l, EndExpired)
	if l.LockDelay() > 0 {
		s.block(l)
		return Result{Lease: view}
	}
	s.wake(ix, now, l.Resources)
	return Result{Lease: view}
}

// block puts the resources of l, which ended without a clean release, in
// its lock-delay.
func (s *State) block(l *lease) {
	for _, r := range l.Resources {
		b := block{token: l.Token, delay: l.LockDelay()}
		s.blocks.set(r, b)
		s.armLockDelay(r, b)
	}
}

func (s *State) unblock(ix uint64, now int64, c *Unblock) Result {
	if b, ok := s.blocks.get(c.Resource); ok && b.token == c.Token {
		s.blocks.del(c.Resource)
		s.disarm(lockDelayKey(c.Resource))
		s.wake(ix, now, []string{c.Resource})
	}
	return Result{}
}

func (s *State) cancel(ix uint64, now int64, c *Cancel) Result {
	if w := s.waiters.at(c.Key); w != nil {
		if w.Attempt != c.Attempt {
			return Result{}
		}
		r := Result{Err: leasehold.Errorf(leasehold.CodeCanceled, "the waiting acquire was canceled")}
		s.endWait(ix, now, w, r)
		return r
	}
	// The grant may have won the race: release it, since nobody will use it.
	rec, ok := s.dedup.lookup(c.Key, "", KindAcquire, fingerprint{})
	if !ok || rec.Lease == nil {
		return Result{}
	}
	l := s.leases.at(rec.Lease.ID)
	if l == nil || l.key != c.Key || l.attempt != c.Attempt {
		return Result{}
	}
	view := s.end(l, EndCanceled)
	s.wake(ix, now, l.Resources)
	return Result{Lease: view}
}

func (s *State) waitTimeout(ix uint64, now int64, c *WaitTimeout) Result {
	w := s.waiters.at(c.Key)
	if w == nil {
		return Result{}
	}
	r := Result{Err: leasehold.Errorf(leasehold.CodeWaitTimeout,
		"waited %v for %q without a grant", w.Wait, w.Resources)}
	s.endWait(ix, now, w, r)
	return r
}

// endWait removes a waiter without granting it and lets those behind it
// move up.
func (s *State) endWait(ix uint64, now int64, w *waiter, r Result) {
	heads := s.dequeue(w)
	s.dedup.put(w.key, KindAcquire, w.sum, now, r, s.cfg)
	s.obs.WaitEnded(w.key, r)
	s.emitWaiter(EventWithdrawn, &w.Acquire)
	s.wake(ix, now, heads)
}

func validateRequestID(id string) error {
	return leasehold.ValidateName("request_id", id, leasehold.MaxRequestIDLen, false)
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

type nopObserver struct{}

func (nopObserver) Granted(*leasehold.Lease, string)        {}
func (nopObserver) Renewed(*leasehold.Lease, time.Duration) {}
func (nopObserver) Ended(*leasehold.Lease, EndReason)       {}
func (nopObserver) WaitEnded(string, Result)                {}
