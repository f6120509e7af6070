package fsm

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A property test: random command sequences against a small reference
// model written for clarity, not speed. After every entry the state must
// equal the model (holders, leases, lock-delays, waiters in order, dedup
// records in order), the observer must have heard exactly the model's
// events, and invariants 1, 2, 6 and 7 of DESIGN.md are checked directly.
// Several callers send requests, reusing each other's request IDs: a
// request ID counts only within its caller and secret.
//
// Deeper runs: go test -run TestPropertyModel ./fsm -rapid.checks=20000

// ---- the reference model ----

type mLease struct {
	id                           uint64
	res                          []string
	secret                       [32]byte
	ttl, lockDelay, maxHold, age time.Duration
	renews                       uint64
	key                          mKey
	attempt                      string // the latest attempt answered with it
	renewKey                     mKey   // the last renewal's scope
	renewRem                     time.Duration
}

type mBlock struct {
	token uint64
	delay time.Duration
}

// mKey is the model's scope of a request ID: who sent it, with which
// secret. A retry finds a record only under the same mKey.
type mKey struct {
	caller string
	secret [32]byte
	id     string
}

// String is the State's encoding of the key, for comparing with it.
func (k mKey) String() string { return requestKey(k.caller, k.secret, k.id) }

func cmdKey(c Command) mKey {
	switch c := c.(type) {
	case *Acquire:
		return mKey{c.Caller, c.SecretHash, c.RequestID}
	case *Renew:
		return mKey{c.Caller, c.SecretHash, c.RequestID}
	case *Release:
		return mKey{c.Caller, c.SecretHash, c.RequestID}
	}
	return mKey{}
}

// sameRequest is the model's reading of "a retry is the same request": an
// acquire asks for the same resources with the same options, a release
// names the same lease. Renewals are never recorded, so only a record's
// kind is checked against them.
func sameRequest(first, retry Command) bool {
	switch a := first.(type) {
	case *Acquire:
		b, ok := retry.(*Acquire)
		return ok && slices.Equal(a.Resources, b.Resources) && a.Owner == b.Owner && a.Operation == b.Operation &&
			a.TTL == b.TTL && a.Wait == b.Wait && a.LockDelay == b.LockDelay && a.MaxHold == b.MaxHold &&
			maps.Equal(a.Metadata, b.Metadata)
	case *Release:
		b, ok := retry.(*Release)
		return ok && a.LeaseID == b.LeaseID
	}
	return true
}

type mRec struct {
	key  mKey
	kind Kind
	req  Command // the first request
	time int64
	res  Result
}

type model struct {
	cfg       Config
	lastToken uint64
	leases    map[uint64]*mLease
	holders   map[string]uint64
	blocks    map[string]mBlock
	waiters   []*Acquire // in arrival order
	dedup     []mRec     // in the order the answers were recorded
	events    []string

	// for the generator
	ever     []uint64            // every lease ever granted
	secretOf map[uint64][32]byte // lease -> secret hash
	history  map[string][]uint64 // resource -> leases that held it
	acquires []*Acquire          // acquires sent with a request ID
	sent     []Command           // commands sent with a request ID
	sentKeys map[mKey]bool       // their scopes
}

func newModel(cfg Config) *model {
	return &model{
		cfg: cfg, leases: map[uint64]*mLease{}, holders: map[string]uint64{},
		blocks: map[string]mBlock{}, secretOf: map[uint64][32]byte{}, history: map[string][]uint64{},
		sentKeys: map[mKey]bool{},
	}
}

func (m *model) event(format string, args ...any) {
	m.events = append(m.events, fmt.Sprintf(format, args...))
}

func errResult(c leasehold.Code) Result { return Result{Err: &leasehold.Error{Code: c}} }

func (m *model) recIndex(key mKey) int {
	return slices.IndexFunc(m.dedup, func(r mRec) bool { return r.key == key })
}

func (m *model) lookup(c Command, k Kind) (Result, bool) {
	key := cmdKey(c)
	if key.id == "" {
		return Result{}, false
	}
	i := m.recIndex(key)
	if i < 0 {
		return Result{}, false
	}
	if m.dedup[i].kind != k || !sameRequest(m.dedup[i].req, c) {
		return errResult(leasehold.CodeInvalid), true
	}
	r := m.dedup[i].res
	r.Dup = true
	return r, true
}

// put records the answer to c as the newest; the oldest go past DedupMax.
func (m *model) put(c Command, k Kind, now int64, r Result) {
	key := cmdKey(c)
	if key.id == "" {
		return
	}
	if i := m.recIndex(key); i >= 0 {
		m.dedup = slices.Delete(m.dedup, i, i+1)
	}
	m.dedup = append(m.dedup, mRec{key: key, kind: k, req: c, time: now, res: r})
	for len(m.dedup) > m.cfg.DedupMax {
		m.dedup = m.dedup[1:]
	}
}

// evict forgets answers a whole window old (batch times only grow here).
func (m *model) evict(now int64) {
	cutoff := now - int64(m.cfg.DedupWindow)
	m.dedup = slices.DeleteFunc(m.dedup, func(r mRec) bool { return r.time <= cutoff })
}

func (m *model) waiterIndex(key mKey) int {
	if key.id == "" {
		return -1
	}
	return slices.IndexFunc(m.waiters, func(w *Acquire) bool { return cmdKey(w) == key })
}

// named finds the scope a Cancel or WaitTimeout names by its key string.
func (m *model) named(key string) (mKey, bool) {
	for _, w := range m.waiters {
		if k := cmdKey(w); k.id != "" && k.String() == key {
			return k, true
		}
	}
	for _, r := range m.dedup {
		if r.key.String() == key {
			return r.key, true
		}
	}
	return mKey{}, false
}

// free: every resource is unheld, out of lock-delay, and wanted by none of
// the first `before` waiters (before < 0: by no waiter at all).
func (m *model) free(res []string, before int) bool {
	if before < 0 {
		before = len(m.waiters)
	}
	for _, r := range res {
		if _, held := m.holders[r]; held {
			return false
		}
		if _, blocked := m.blocks[r]; blocked {
			return false
		}
		for _, w := range m.waiters[:before] {
			if slices.Contains(w.Resources, r) {
				return false
			}
		}
	}
	return true
}

func validAcquire(c *Acquire) bool {
	if len(c.Resources) == 0 || len(c.Resources) > leasehold.MaxResources {
		return false
	}
	for i, r := range c.Resources {
		if r == "" || slices.Contains(c.Resources[:i], r) {
			return false
		}
	}
	switch {
	case c.TTL < leasehold.MinTTL || c.TTL > leasehold.MaxTTL,
		c.Wait < 0 || c.Wait > leasehold.MaxWait,
		c.LockDelay < 0 || c.LockDelay > leasehold.MaxLockDelay,
		c.Wait > 0 && c.RequestID == "",
		c.MaxHold != 0 && (c.MaxHold < c.TTL || c.MaxHold > leasehold.MaxMaxHold):
		return false
	}
	return true
}

func (m *model) grant(ix uint64, c *Acquire) Result {
	tok := max(ix, m.lastToken+1)
	m.lastToken = tok
	l := &mLease{id: tok, res: c.Resources, secret: c.SecretHash, ttl: c.TTL,
		lockDelay: c.LockDelay, maxHold: c.MaxHold, key: cmdKey(c), attempt: c.Attempt}
	m.leases[tok] = l
	for _, r := range c.Resources {
		m.holders[r] = tok
		m.history[r] = append(m.history[r], tok)
	}
	m.ever = append(m.ever, tok)
	m.secretOf[tok] = c.SecretHash
	m.event("granted lease=%d token=%d req=%s res=%v", tok, tok, showKey(cmdKey(c).String()), c.Resources)
	return Result{Lease: &leasehold.Lease{ID: tok}, Remaining: c.TTL}
}

func (m *model) end(l *mLease, why EndReason) Result {
	delete(m.leases, l.id)
	for _, r := range l.res {
		if m.holders[r] == l.id {
			delete(m.holders, r)
		}
	}
	m.event("ended lease=%d why=%v", l.id, why)
	return Result{Lease: &leasehold.Lease{ID: l.id}}
}

// settle grants, in arrival order, every waiter that can have all it asks
// for, until none can: the obviously-correct reading of invariant 6.
func (m *model) settle(ix uint64, now int64) {
	for {
		i := slices.IndexFunc(m.waiters, func(w *Acquire) bool {
			return m.free(w.Resources, slices.Index(m.waiters, w))
		})
		if i < 0 {
			return
		}
		w := m.waiters[i]
		m.waiters = slices.Delete(m.waiters, i, i+1)
		r := m.grant(ix, w)
		m.put(w, KindAcquire, now, r)
		m.event("waitended req=%s %s", showKey(cmdKey(w).String()), summarize(r))
	}
}

func (m *model) endWait(now int64, i int, r Result) Result {
	w := m.waiters[i]
	m.waiters = slices.Delete(m.waiters, i, i+1)
	m.put(w, KindAcquire, now, r)
	m.event("waitended req=%s %s", showKey(cmdKey(w).String()), summarize(r))
	return r
}

func (m *model) apply(ix uint64, now int64, cmds []Command) []Result {
	m.evict(now)
	out := make([]Result, len(cmds))
	for i, c := range cmds {
		out[i] = m.cmd(ix, now, c)
		m.settle(ix, now)
	}
	return out
}

func (m *model) cmd(ix uint64, now int64, c Command) Result {
	switch c := c.(type) {
	case *Acquire:
		if i := m.waiterIndex(cmdKey(c)); i >= 0 {
			if !sameRequest(m.waiters[i], c) {
				return errResult(leasehold.CodeInvalid)
			}
			m.waiters[i].Attempt = c.Attempt
			return Result{Queued: true, Dup: true, ForeignSecret: m.waiters[i].SecretHash != c.SecretHash}
		}
		if r, ok := m.lookup(c, KindAcquire); ok {
			if r.Lease == nil {
				return r
			}
			l := m.leases[r.Lease.ID]
			if l == nil || l.key != cmdKey(c) {
				nf := errResult(leasehold.CodeNotFound)
				nf.Dup = true
				return nf
			}
			r.ForeignSecret = l.secret != c.SecretHash
			l.attempt = c.Attempt
			return r
		}
		var r Result
		switch {
		case !validAcquire(c):
			r = errResult(leasehold.CodeInvalid)
		case m.free(c.Resources, -1):
			r = m.grant(ix, c)
		case c.Wait > 0:
			w := *c // a retry changes its attempt
			m.waiters = append(m.waiters, &w)
			r = Result{Queued: true}
		default:
			r = errResult(leasehold.CodeHeld)
		}
		m.put(c, KindAcquire, now, r)
		if r.Queued {
			m.event("queued req=%s wait=%v", showKey(cmdKey(c).String()), c.Wait)
		}
		return r

	case *Renew:
		if r, ok := m.lookup(c, KindRenew); ok {
			return r
		}
		// A retry of a lease's last renewal gets its answer; renewals are
		// not kept in the dedup window.
		if l := m.leases[c.LeaseID]; l != nil && c.RequestID != "" && l.renewKey == cmdKey(c) && l.secret == c.SecretHash {
			return Result{Lease: &leasehold.Lease{ID: l.id}, Remaining: l.renewRem, Dup: true}
		}
		r := func() Result {
			l := m.leases[c.LeaseID]
			if l == nil {
				return errResult(leasehold.CodeNotFound)
			}
			if l.secret != c.SecretHash {
				return errResult(leasehold.CodeNotHolder)
			}
			rem := l.ttl
			if l.maxHold > 0 {
				left := l.maxHold - max(c.Age, l.age)
				if left <= 0 {
					return errResult(leasehold.CodeLimit)
				}
				rem = min(rem, left)
			}
			l.age = max(l.age, c.Age)
			l.renews++
			m.event("renewed lease=%d count=%d remaining=%v", l.id, l.renews, rem)
			l.renewKey, l.renewRem = cmdKey(c), rem
			return Result{Lease: &leasehold.Lease{ID: l.id}, Remaining: rem}
		}()
		return r

	case *Release:
		if r, ok := m.lookup(c, KindRelease); ok {
			return r
		}
		var r Result
		switch l := m.leases[c.LeaseID]; {
		case l == nil:
			r = errResult(leasehold.CodeNotFound)
		case l.secret != c.SecretHash:
			r = errResult(leasehold.CodeNotHolder)
		default:
			r = m.end(l, EndReleased)
		}
		m.put(c, KindRelease, now, r)
		return r

	case *Expire:
		l := m.leases[c.LeaseID]
		if l == nil || l.renews != c.RenewCount {
			return Result{}
		}
		r := m.end(l, EndExpired)
		if l.lockDelay > 0 {
			for _, res := range l.res {
				m.blocks[res] = mBlock{token: l.id, delay: l.lockDelay}
				m.event("blocked res=%s token=%d delay=%v", res, l.id, l.lockDelay)
			}
		}
		return r

	case *Unblock:
		if b, ok := m.blocks[c.Resource]; ok && b.token == c.Token {
			delete(m.blocks, c.Resource)
		}
		return Result{}

	case *Cancel:
		key, ok := m.named(c.Key)
		if !ok {
			return Result{}
		}
		if i := m.waiterIndex(key); i >= 0 {
			if m.waiters[i].Attempt != c.Attempt {
				return Result{}
			}
			return m.endWait(now, i, errResult(leasehold.CodeCanceled))
		}
		i := m.recIndex(key)
		if i < 0 || m.dedup[i].kind != KindAcquire || m.dedup[i].res.Lease == nil {
			return Result{}
		}
		l := m.leases[m.dedup[i].res.Lease.ID]
		if l == nil || l.key != key || l.attempt != c.Attempt {
			return Result{}
		}
		return m.end(l, EndCanceled)

	case *WaitTimeout:
		if key, ok := m.named(c.Key); ok {
			if i := m.waiterIndex(key); i >= 0 {
				return m.endWait(now, i, errResult(leasehold.CodeWaitTimeout))
			}
		}
		return Result{}
	}
	panic("model: unknown command")
}

// ---- comparing the state with the model ----

func compareWithModel(t *rapid.T, s *State, m *model) {
	if s.lastToken != m.lastToken {
		t.Fatalf("lastToken %d, model %d", s.lastToken, m.lastToken)
	}
	if s.leases.byID.len() != len(m.leases) {
		t.Fatalf("%d leases, model %d", s.leases.byID.len(), len(m.leases))
	}
	for id, ml := range m.leases {
		l := s.leases.byID.at(id)
		if l == nil {
			t.Fatalf("lease %d missing", id)
		}
		if l.Token != id || !slices.Equal(l.Resources, ml.res) || l.RenewCount != ml.renews ||
			l.heldFor != ml.age || l.secretHash != ml.secret || l.key != ml.key.String() {
			t.Fatalf("lease %d = %+v (age %v), model %+v", id, l.leaseFields, l.heldFor, ml)
		}
	}
	if !mapsEqual(plainMap(&s.leases.holders), m.holders) {
		t.Fatalf("holders %v, model %v", s.leases.holders, m.holders)
	}
	if s.leases.blocks.len() != len(m.blocks) {
		t.Fatalf("blocks %v, model %v", s.leases.blocks, m.blocks)
	}
	for r, b := range m.blocks {
		if sb, ok := s.leases.blocks.get(r); !ok || sb.token != b.token || sb.delay != b.delay {
			t.Fatalf("block on %s = %+v, model %+v", r, sb, b)
		}
	}
	// Waiters in arrival order, and each resource's queue in that order.
	ws := make([]*waiter, 0, s.leases.waiters.len())
	for _, w := range s.leases.waiters.all() {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].arrival < ws[j].arrival })
	got := make([]string, len(ws))
	for i, w := range ws {
		got[i] = w.key
	}
	want := make([]string, len(m.waiters))
	for i, w := range m.waiters {
		want[i] = cmdKey(w).String()
	}
	if !slices.Equal(got, want) {
		t.Fatalf("waiters %v, model %v", got, want)
	}
	for _, r := range propResources {
		var q, mq []string
		for _, w := range s.leases.lines[r] {
			q = append(q, w.key)
		}
		for _, w := range m.waiters {
			if slices.Contains(w.Resources, r) {
				mq = append(mq, cmdKey(w).String())
			}
		}
		if !slices.Equal(q, mq) {
			t.Fatalf("queue of %s = %v, model %v", r, q, mq)
		}
	}
	// Dedup records, in order, with their answers.
	var recs []string
	s.dedup.each(func(r *dedupRec) {
		recs = append(recs, fmt.Sprintf("%q/%d/%d/%s", r.key, r.kind, r.time, summarize(r.answer())))
	})
	var mrecs []string
	for _, r := range m.dedup {
		mrecs = append(mrecs, fmt.Sprintf("%q/%d/%d/%s", r.key.String(), r.kind, r.time, summarize(r.res)))
	}
	if !slices.Equal(recs, mrecs) {
		t.Fatalf("dedup records:\n%v\nmodel:\n%v", recs, mrecs)
	}
}

func mapsEqual[K, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// checkStructure checks the state's own consistency and invariant 6
// without the model: no waiter is left that could be granted.
func checkStructure(t *rapid.T, s *State) {
	for r, id := range s.leases.holders.all() {
		l := s.leases.byID.at(id)
		if l == nil || !slices.Contains(l.Resources, r) {
			t.Fatalf("holder of %s is lease %d, which does not hold it", r, id)
		}
		if _, blocked := s.leases.blocks.get(r); blocked {
			t.Fatalf("%s is both held and in lock-delay", r)
		}
	}
	for id, l := range s.leases.byID.all() {
		for _, r := range l.Resources {
			if s.leases.holders.at(r) != id {
				t.Fatalf("lease %d lists %s, held by %d", id, r, s.leases.holders.at(r))
			}
		}
	}
	for r, q := range s.leases.lines {
		if len(q) == 0 {
			t.Fatalf("empty queue kept for %s", r)
		}
		for i, w := range q {
			if s.leases.waiters.at(w.key) != w || !slices.Contains(w.Resources, r) {
				t.Fatalf("queue of %s holds a stray waiter %q", r, w.RequestID)
			}
			if i > 0 && q[i-1].arrival >= w.arrival {
				t.Fatalf("queue of %s out of arrival order", r)
			}
		}
	}
	for id, w := range s.leases.waiters.all() {
		grantable := true
		for _, r := range w.Resources {
			if !slices.Contains(s.leases.lines[r], w) {
				t.Fatalf("waiter %q missing from the queue of %s", id, r)
			}
			_, held := s.leases.holders.get(r)
			_, blocked := s.leases.blocks.get(r)
			if held || blocked || s.leases.lines[r][0] != w {
				grantable = false
			}
		}
		if grantable {
			t.Fatalf("invariant 6: waiter %q is first in line for free resources %v but was not granted", id, w.Resources)
		}
	}
}

// tokenWatch checks invariant 1 as grants happen, across the whole run
// (restores included): per resource, each new holder's token is larger
// than every earlier one, and no token is issued twice.
type tokenWatch struct {
	*recorder
	last   map[string]uint64
	issued map[uint64]bool
	errs   []string
}

func (w *tokenWatch) Granted(l *leasehold.Lease, requestID string) {
	w.recorder.Granted(l, requestID)
	if l.Token != l.ID || w.issued[l.Token] {
		w.errs = append(w.errs, fmt.Sprintf("token %d (lease %d) issued twice or not the lease id", l.Token, l.ID))
	}
	w.issued[l.Token] = true
	for _, r := range l.Resources {
		if l.Token <= w.last[r] {
			w.errs = append(w.errs, fmt.Sprintf("invariant 1: %s granted with token %d after token %d", r, l.Token, w.last[r]))
		}
		w.last[r] = l.Token
	}
}

// ---- the generator ----

var propResources = []string{"a", "b", "c", "d"}

// propCallers send the requests: no auth (""), and two token names.
var propCallers = []string{"", "alice", "bob"}

type gen struct {
	t   *rapid.T
	m   *model
	n   int
	bad map[Command]string // commands that must fail, and why
}

func (g *gen) fresh(prefix string) string { g.n++; return fmt.Sprintf("%s%d", prefix, g.n) }

// pickLease returns a lease id: mostly a live one, else any ever granted,
// else one that never existed.
func (g *gen) pickLease() uint64 {
	live := make([]uint64, 0, len(g.m.leases))
	for id := range g.m.leases {
		live = append(live, id)
	}
	slices.Sort(live)
	switch {
	case len(live) > 0 && rapid.IntRange(0, 3).Draw(g.t, "live") > 0:
		return rapid.SampledFrom(live).Draw(g.t, "lease")
	case len(g.m.ever) > 0:
		return rapid.SampledFrom(g.m.ever).Draw(g.t, "lease")
	}
	return 1_000_000
}

// proof picks the secret to present for lease id: the right one, one
// never issued, or an earlier holder's of the same resources.
func (g *gen) proof(id uint64) ([32]byte, bool) {
	right, known := g.m.secretOf[id]
	switch rapid.IntRange(0, 3).Draw(g.t, "proof") {
	case 0, 1:
		return right, known
	case 2:
		return secret(g.fresh("wrong")), false
	}
	if len(g.m.ever) == 0 {
		return right, known
	}
	other := g.m.secretOf[rapid.SampledFrom(g.m.ever).Draw(g.t, "other")]
	return other, known && other == right
}

// attempt names the try of a request: two, so that Cancels both match and
// miss the latest attempt.
func (g *gen) attempt() string { return rapid.SampledFrom([]string{"A", "B"}).Draw(g.t, "attempt") }

func (g *gen) caller() string { return rapid.SampledFrom(propCallers).Draw(g.t, "caller") }

func (g *gen) acquire() Command {
	c := &Acquire{
		RequestID: g.fresh("q"),
		Resources: rapid.SliceOfNDistinct(rapid.SampledFrom(propResources), 1, 3, rapid.ID[string]).Draw(g.t, "res"),
		Owner:     "o", Operation: "op",
		TTL:        10 * time.Second,
		LockDelay:  rapid.SampledFrom([]time.Duration{0, 0, time.Second}).Draw(g.t, "lockdelay"),
		MaxHold:    rapid.SampledFrom([]time.Duration{0, 0, 30 * time.Second}).Draw(g.t, "maxhold"),
		SecretHash: secret(g.fresh("s")),
		Attempt:    g.attempt(),
		Caller:     g.caller(),
	}
	if len(g.m.acquires) > 0 && rapid.IntRange(0, 3).Draw(g.t, "collide") == 0 {
		// Another request's ID: the same or another caller, another
		// secret. It is a request of its own, not a retry.
		c.RequestID = rapid.SampledFrom(g.m.acquires).Draw(g.t, "collide with").RequestID
	}
	if rapid.Bool().Draw(g.t, "wait") {
		c.Wait = time.Minute
	} else if rapid.IntRange(0, 3).Draw(g.t, "anon") == 0 {
		c.RequestID = ""
	}
	switch rapid.IntRange(0, 15).Draw(g.t, "invalid") {
	case 0:
		c.Resources = nil
	case 1:
		c.TTL = 0
	case 2:
		c.RequestID, c.Wait = "", time.Second
	case 3:
		c.Resources = append(c.Resources, c.Resources[0])
	}
	if c.RequestID != "" {
		g.m.acquires = append(g.m.acquires, c)
	}
	return c
}

func (g *gen) requestID() string {
	if rapid.Bool().Draw(g.t, "with id") {
		return g.fresh("q")
	}
	return ""
}

func (g *gen) command() Command {
	switch rapid.IntRange(0, 13).Draw(g.t, "kind") {
	case 0, 1, 2:
		return g.acquire()
	case 3, 4:
		id := g.pickLease()
		h, right := g.proof(id)
		c := &Renew{RequestID: g.requestID(), LeaseID: id, SecretHash: h, Progress: g.fresh("p"), Caller: g.caller(),
			Age: rapid.SampledFrom([]time.Duration{0, 10 * time.Second, 25 * time.Second, 29 * time.Second, 30 * time.Second, 45 * time.Second}).Draw(g.t, "age")}
		if !right {
			g.bad[c] = "renew with a wrong secret"
		}
		return c
	case 5, 6:
		id := g.pickLease()
		h, right := g.proof(id)
		c := &Release{RequestID: g.requestID(), LeaseID: id, SecretHash: h, Caller: g.caller()}
		if !right {
			g.bad[c] = "release with a wrong secret"
		}
		return c
	case 7:
		// An earlier holder of a resource acts with its own secret on the
		// current holder's lease, or on its own ended lease.
		r := rapid.SampledFrom(propResources).Draw(g.t, "stale res")
		cur, held := g.m.holders[r]
		var olds []uint64
		for _, id := range g.m.history[r] {
			if id != cur {
				olds = append(olds, id)
			}
		}
		if len(olds) == 0 {
			return g.acquire()
		}
		old := rapid.SampledFrom(olds).Draw(g.t, "old")
		target := old
		if held && rapid.Bool().Draw(g.t, "on new") {
			target = cur
		}
		var c Command
		if rapid.Bool().Draw(g.t, "renew") {
			c = &Renew{RequestID: g.requestID(), LeaseID: target, SecretHash: g.m.secretOf[old]}
		} else {
			c = &Release{RequestID: g.requestID(), LeaseID: target, SecretHash: g.m.secretOf[old]}
		}
		if g.m.secretOf[old] != g.m.secretOf[target] || g.m.leases[target] == nil {
			g.bad[c] = fmt.Sprintf("earlier holder %d acting on lease %d", old, target)
		}
		return c
	case 8:
		id := g.pickLease()
		rc := uint64(0)
		if l := g.m.leases[id]; l != nil {
			rc = l.renews
		}
		switch rapid.IntRange(0, 3).Draw(g.t, "count") {
		case 0:
			rc++
		case 1:
			if rc > 0 {
				rc--
			}
		}
		return &Expire{LeaseID: id, RenewCount: rc}
	case 9:
		r := rapid.SampledFrom(propResources).Draw(g.t, "unblock")
		tok := g.m.blocks[r].token
		if rapid.IntRange(0, 3).Draw(g.t, "stale unblock") == 0 {
			tok = g.pickLease()
		}
		return &Unblock{Resource: r, Token: tok}
	case 10, 11:
		// Mostly a waiter's or an acquire's own key; sometimes the key of
		// another caller who used the same request ID, which must not
		// touch what the first caller got.
		var key mKey
		switch {
		case len(g.m.waiters) > 0 && rapid.Bool().Draw(g.t, "waiter"):
			key = cmdKey(rapid.SampledFrom(g.m.waiters).Draw(g.t, "w"))
		case len(g.m.acquires) > 0 && rapid.Bool().Draw(g.t, "acquire id"):
			key = cmdKey(rapid.SampledFrom(g.m.acquires).Draw(g.t, "a"))
		}
		if key.id != "" && rapid.IntRange(0, 3).Draw(g.t, "other caller") == 0 {
			key.caller = g.caller()
		}
		if rapid.Bool().Draw(g.t, "cancel") {
			return &Cancel{Key: key.String(), Attempt: g.attempt()}
		}
		return &WaitTimeout{Key: key.String()}
	default:
		// A retry of an earlier request, or its ID reused for another kind.
		if len(g.m.sent) == 0 {
			return g.acquire()
		}
		c := rapid.SampledFrom(g.m.sent).Draw(g.t, "retry")
		switch rapid.IntRange(0, 5).Draw(g.t, "misuse") {
		case 0:
			// The ID reused, by the same caller with the same secret, for
			// another kind of request.
			k := cmdKey(c)
			switch c.(type) {
			case *Acquire:
				return &Release{RequestID: k.id, LeaseID: g.pickLease(), SecretHash: k.secret, Caller: k.caller}
			case *Renew:
				return &Acquire{RequestID: k.id, Resources: []string{"a"}, TTL: time.Second, SecretHash: k.secret, Caller: k.caller}
			default:
				return &Renew{RequestID: k.id, LeaseID: g.pickLease(), SecretHash: k.secret, Caller: k.caller}
			}
		case 1:
			// The ID reused for a different request of the same kind.
			switch c := c.(type) {
			case *Acquire:
				changed := *c
				changed.Attempt = g.attempt()
				changed.TTL += time.Second
				return &changed
			case *Release:
				changed := *c
				changed.LeaseID++
				return &changed
			}
			return c
		case 2:
			// The same request from another caller: not a retry of it.
			switch c := c.(type) {
			case *Acquire:
				other := *c
				other.Attempt, other.Caller = g.attempt(), g.caller()
				return &other
			case *Release:
				other := *c
				other.Caller = g.caller()
				return &other
			}
			return c
		}
		if a, ok := c.(*Acquire); ok {
			retry := *a // a retry on another connection: another attempt
			retry.Attempt = g.attempt()
			return &retry
		}
		return c
	}
}

func requestIDOf(c Command) string {
	switch c := c.(type) {
	case *Acquire:
		return c.RequestID
	case *Renew:
		return c.RequestID
	case *Release:
		return c.RequestID
	}
	return ""
}

// ---- the property ----

func TestPropertyModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{
			DedupWindow: rapid.SampledFrom([]time.Duration{15 * time.Second, time.Hour}).Draw(t, "window"),
			DedupMax:    rapid.SampledFrom([]int{4, 16, 1 << 20}).Draw(t, "dedupmax"),
		}
		m := newModel(cfg)
		var capt capturing
		defer capt.done(t)
		watch := &tokenWatch{recorder: &recorder{timed: armed{}}, last: map[string]uint64{}, issued: map[uint64]bool{}}
		s := New(cfg, watch)
		g := &gen{t: t, m: m, bad: map[Command]string{}}
		var log []*Batch
		var ixs []uint64
		ix, now := uint64(0), t0
		entries := rapid.IntRange(1, 100).Draw(t, "entries")
		for e := range entries {
			ix += uint64(rapid.IntRange(1, 3).Draw(t, "ix step"))
			now += int64(rapid.IntRange(1, 4).Draw(t, "time step")) * int64(time.Second)
			cmds := make([]Command, rapid.IntRange(1, 4).Draw(t, "cmds"))
			for i := range cmds {
				cmds[i] = g.command()
			}
			b := &Batch{Time: now, Cmds: cmds}
			log, ixs = append(log, b), append(ixs, ix)

			got := s.Apply(ix, b)
			want := m.apply(ix, now, cmds)
			for i := range cmds {
				gs, ws := summarize(got[i]), summarize(want[i])
				if gs != ws {
					t.Fatalf("entry %d (index %d) command %d %T %+v:\n got %s (%v)\nwant %s",
						e, ix, i, cmds[i], cmds[i], gs, got[i].Err, ws)
				}
				if l := got[i].Lease; l != nil && l.Token != l.ID {
					t.Fatalf("lease %d has token %d", l.ID, l.Token)
				}
				// Invariant 2: a wrong secret never succeeds.
				if why, bad := g.bad[cmds[i]]; bad && got[i].Err == nil {
					t.Fatalf("invariant 2: %s succeeded: %s", why, gs)
				}
				// Invariant 7: a retry answers from the first answer and
				// changes nothing (the event comparison below shows that).
				if got[i].Dup && requestIDOf(cmds[i]) == "" {
					t.Fatalf("a request without an ID was answered as a dup")
				}
				// A request ID counts only within its caller and secret:
				// nobody else's request is ever answered from its record.
				if got[i].Dup && !m.sentKeys[cmdKey(cmds[i])] {
					t.Fatalf("%T %+v was answered from another caller's record: %s", cmds[i], cmds[i], gs)
				}
				if id := requestIDOf(cmds[i]); id != "" && !slices.Contains(m.sent, cmds[i]) {
					m.sent = append(m.sent, cmds[i])
					m.sentKeys[cmdKey(cmds[i])] = true
				}
			}
			if evs := watch.take(); !slices.Equal(evs, m.events) {
				t.Fatalf("entry %d: observer events:\n got %q\nwant %q", e, evs, m.events)
			}
			m.events = nil
			if len(watch.errs) > 0 {
				t.Fatalf("%v", watch.errs)
			}
			checkStructure(t, s)
			compareWithModel(t, s, m)
			watch.timed.check(t, s)
			capt.step(t, s)

			if rapid.IntRange(0, 7).Draw(t, "restore") == 0 {
				snap := s.Snapshot()
				r, err := Restore(snap, cfg, watch)
				if err != nil {
					t.Fatalf("restore: %v", err)
				}
				if !bytes.Equal(r.Snapshot(), snap) {
					t.Fatalf("restored snapshot differs")
				}
				s = r
				watch.timed.reset(s)
			}
		}
		// Determinism: the same log on a fresh state gives the same bytes.
		fresh := New(cfg, nil)
		for i, b := range log {
			fresh.Apply(ixs[i], b)
		}
		if !bytes.Equal(fresh.Snapshot(), s.Snapshot()) {
			t.Fatalf("replaying the log on a fresh state gives a different snapshot")
		}
	})
}
