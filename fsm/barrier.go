package fsm

import (
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Barriers (leasehold/barrier.go has the vocabulary): a named barrier of
// Parties parties, in phases numbered from 1.
//
// A cyclic barrier's parties arrive, each arrival bound to a lease on the
// internal resource leasehold.BarrierPartyResource(name, participant),
// renewed with the ordinary Renew and ended like any lease. A party lost
// before the trip (its lease expired, was released or forced) is no
// longer counted: the phase waits for one more arrival, a restarted
// participant may arrive again, and the timeout, if any, still runs. The
// arrival that completes the count trips the phase in its own entry: the
// trip takes a fencing token (nextToken, so trip tokens strictly increase
// per barrier), the arrival leases end (released), and the next phase
// opens. After the trip nothing a party does changes the phase: a lost
// party has nothing left to lose.
//
// A latch is counted down, by requests rather than by parties with
// leases; it trips at zero and stays tripped (count-downs then change
// nothing) until a Reset opens the next phase.
//
// A phase may also end broken: its timeout (from its first arrival or
// count-down, timed by the leader: a countdown, countdown.go) passed, or
// it was reset. Its parties' leases end, and the next phase opens.
// Every end is kept (the last leasehold.BarrierHistory of them), so a
// waiter for a phase learns how it ended and, if it tripped, its token.
//
// Retries: Arrive, CountDown, Reset and Delete carry a request ID, scoped
// to their caller (and an Arrive's secret), recorded in the dedup window
// with the phase they acted on, so a retry of the arrival that tripped a
// phase is told of that trip instead of arriving in the next phase.
// Create is retried by its values.

// The kinds of the barrier commands. Their bodies start with their body
// version (the row's, in the table of commands) in every batch version:
// they had it in batch version 2 already, before version 3 gave every
// kind one (kindRow.inBody). A field added later is a new version of the
// same kind, not a new kind.
const (
	KindBarrierCreate    Kind = 90
	KindBarrierArrive    Kind = 91
	KindBarrierCountDown Kind = 92
	KindBarrierReset     Kind = 93
	KindBarrierDelete    Kind = 94
	KindBarrierTimeout   Kind = 95 // a phase's timeout ran out on the leader
)

// BarrierCreate creates a barrier, or answers with the one there if it has
// the same kind, parties and timeout.
type BarrierCreate struct {
	Name    string
	Type    leasehold.BarrierKind
	Parties uint32
	Timeout time.Duration // 0: none
	Caller  string
}

// BarrierArrive is a party's arrival at a cyclic barrier, bound to a new
// lease of TTL whose secret hashes to SecretHash. Phase, if not 0, is the
// phase it must arrive in.
type BarrierArrive struct {
	RequestID   string
	Name        string
	Participant string
	Phase       uint64
	TTL         time.Duration
	SecretHash  [32]byte
	Caller      string
}

// BarrierCountDown counts a latch down by Count. Phase, if not 0, is the
// phase it must count in.
type BarrierCountDown struct {
	RequestID string
	Name      string
	Phase     uint64
	Count     uint32
	Caller    string
}

// BarrierReset ends the current phase (broken, if it had not tripped) and
// opens the next.
type BarrierReset struct {
	RequestID string
	Name      string
	Caller    string
}

// BarrierDelete removes a barrier; its parties' leases end.
type BarrierDelete struct {
	RequestID string
	Name      string
	Caller    string
}

// BarrierTimeout ends Phase of Name broken, if it is still open: the
// leader proposes it when the phase's timeout runs out. Started is the
// phase's first arrival (leader's wall clock, as applied), so a timeout
// armed for a barrier since deleted and created again, at the same phase,
// finds another phase and does nothing.
type BarrierTimeout struct {
	Name    string
	Phase   uint64
	Started int64
}

func (*BarrierCreate) Kind() Kind    { return KindBarrierCreate }
func (*BarrierArrive) Kind() Kind    { return KindBarrierArrive }
func (*BarrierCountDown) Kind() Kind { return KindBarrierCountDown }
func (*BarrierReset) Kind() Kind     { return KindBarrierReset }
func (*BarrierDelete) Kind() Kind    { return KindBarrierDelete }
func (*BarrierTimeout) Kind() Kind   { return KindBarrierTimeout }

func (c *BarrierCreate) apply(s *State, _ uint64, now int64) Result { return s.barriers.create(now, c) }
func (c *BarrierArrive) apply(s *State, ix uint64, now int64) Result {
	return s.barriers.arrive(ix, now, c)
}
func (c *BarrierCountDown) apply(s *State, ix uint64, now int64) Result {
	return s.barriers.countDown(ix, now, c)
}
func (c *BarrierReset) apply(s *State, _ uint64, now int64) Result  { return s.barriers.reset(now, c) }
func (c *BarrierDelete) apply(s *State, _ uint64, now int64) Result { return s.barriers.delete(now, c) }
func (c *BarrierTimeout) apply(s *State, _ uint64, now int64) Result {
	return s.barriers.timeout(now, c)
}

func (c *BarrierCreate) encode(e *encoder) {
	e.str(c.Name)
	e.byte1(byte(c.Type))
	e.uvarint(uint64(c.Parties))
	e.varint(int64(c.Timeout))
	e.str(c.Caller)
}

func (c *BarrierCreate) decode(d *decoder) {
	c.Name = d.str()
	c.Type = leasehold.BarrierKind(d.byte1())
	c.Parties = uint32(d.uvarint())
	c.Timeout = time.Duration(d.varint())
	c.Caller = d.str()
}

func (c *BarrierArrive) encode(e *encoder) {
	e.str(c.RequestID)
	e.str(c.Name)
	e.str(c.Participant)
	e.uvarint(c.Phase)
	e.varint(int64(c.TTL))
	e.hash(c.SecretHash)
	e.str(c.Caller)
}

func (c *BarrierArrive) decode(d *decoder) {
	c.RequestID = d.str()
	c.Name = d.str()
	c.Participant = d.str()
	c.Phase = d.uvarint()
	c.TTL = time.Duration(d.varint())
	c.SecretHash = d.hash()
	c.Caller = d.str()
}

func (c *BarrierCountDown) encode(e *encoder) {
	e.str(c.RequestID)
	e.str(c.Name)
	e.uvarint(c.Phase)
	e.uvarint(uint64(c.Count))
	e.str(c.Caller)
}

func (c *BarrierCountDown) decode(d *decoder) {
	c.RequestID = d.str()
	c.Name = d.str()
	c.Phase = d.uvarint()
	c.Count = uint32(d.uvarint())
	c.Caller = d.str()
}

func (c *BarrierReset) encode(e *encoder) {
	e.str(c.RequestID)
	e.str(c.Name)
	e.str(c.Caller)
}

func (c *BarrierReset) decode(d *decoder) {
	c.RequestID = d.str()
	c.Name = d.str()
	c.Caller = d.str()
}

func (c *BarrierDelete) encode(e *encoder) {
	e.str(c.RequestID)
	e.str(c.Name)
	e.str(c.Caller)
}

func (c *BarrierDelete) decode(d *decoder) {
	c.RequestID = d.str()
	c.Name = d.str()
	c.Caller = d.str()
}

func (c *BarrierTimeout) encode(e *encoder) {
	e.str(c.Name)
	e.uvarint(c.Phase)
	e.varint(c.Started)
}

func (c *BarrierTimeout) decode(d *decoder) {
	c.Name = d.str()
	c.Phase = d.uvarint()
	c.Started = d.varint()
}

func (c *BarrierArrive) key() string {
	return scopedKey(false, c.Caller, c.SecretHash, c.RequestID)
}

func (c *BarrierArrive) sum(e *encoder) fingerprint {
	if !e.startSum(false, c.RequestID) {
		return fingerprint{}
	}
	e.str(c.Name)
	e.str(c.Participant)
	e.uvarint(c.Phase)
	e.varint(int64(c.TTL))
	return sumOf(e)
}

func (c *BarrierCountDown) key() string { return scopedKey(false, c.Caller, [32]byte{}, c.RequestID) }

func (c *BarrierCountDown) sum(e *encoder) fingerprint {
	if !e.startSum(false, c.RequestID) {
		return fingerprint{}
	}
	e.str(c.Name)
	e.uvarint(c.Phase)
	e.uvarint(uint64(c.Count))
	return sumOf(e)
}

// nameSum is the fingerprint of a request that names only a barrier.
func nameSum(e *encoder, id, name string) fingerprint {
	if !e.startSum(false, id) {
		return fingerprint{}
	}
	e.str(name)
	return sumOf(e)
}

// The barrier sub-state: the barriers by name, read and written only by
// this file and its snapshot section (snapshot_barrier.go). An arrival's
// lease is the lease sub-state's; the barrier hears of its end
// (leaseEnded).
type barrierState struct {
	st     *State
	byName cowMap[string, *barrier]
}

func (bs *barrierState) init(s *State) {
	*bs = barrierState{st: s, byName: newCowMap[string, *barrier]()}
	s.track(&bs.byName)
}

func (bs *barrierState) captureInto(v *State) {
	v.barriers = barrierState{st: v, byName: bs.byName.freeze()}
}

type barrier struct {
	kind      leasehold.BarrierKind
	parties   uint32
	timeout   time.Duration
	createdAt int64
	phase     uint64 // the current phase
	firstAt   int64  // the current phase's first arrival or count-down (0: none yet)
	tripped   bool   // a latch whose current phase tripped (it stays so until a reset)
	counted   uint32 // a latch: counted down in the current phase
	arrivals  []arrival
	ends      []PhaseEnd // the last leasehold.BarrierHistory ended phases, oldest first
	trips     uint64     // phases tripped in all
	broken    uint64     // phases ended broken (timed out or reset) in all
}

type arrival struct {
	participant string
	lease       uint64
	at          int64
}

func (b *barrier) clone() *barrier {
	c := *b
	c.arrivals = slices.Clone(b.arrivals)
	c.ends = slices.Clone(b.ends)
	return &c
}

// open says the current phase can still trip: not a tripped latch.
func (b *barrier) open() bool { return !b.tripped }

func (b *barrier) arrived() uint32 {
	if b.kind == leasehold.BarrierLatch {
		return b.counted
	}
	return uint32(len(b.arrivals))
}

// PhaseEnd is how one phase ended.
type PhaseEnd struct {
	Phase   uint64
	Outcome leasehold.BarrierOutcome
	Token   uint64    // tripped: the trip's fencing token; 0 otherwise
	At      time.Time // leader's wall clock, display only
	Arrived uint32    // parties arrived (a latch: counted down) when it ended
}

// BarrierParty is one arrival of the current phase.
type BarrierParty struct {
	Participant string
	LeaseID     uint64
	ArrivedAt   time.Time
}

// BarrierInfo is what a barrier command answers and inspection shows.
type BarrierInfo struct {
	Name      string
	Kind      leasehold.BarrierKind
	Parties   uint32
	Timeout   time.Duration
	CreatedAt time.Time
	Phase     uint64    // the current phase
	Arrived   uint32    // arrived (a latch: counted down) in it
	StartedAt time.Time // its first arrival or count-down (zero: none yet)
	Tripped   bool      // a latch whose current phase tripped
	Arrivals  []BarrierParty
	Ends      []PhaseEnd // the last ended phases, oldest first
	Trips     uint64
	Broken    uint64
}

// BarrierResult is a barrier command's answer: the barrier after it, the
// phase the command acted in and, if that phase has ended, how.
type BarrierResult struct {
	Barrier BarrierInfo
	Phase   uint64
	End     *PhaseEnd
}

func (*BarrierResult) answer() {}

// Barrier is a barrier command's answer (*BarrierResult), nil for none.
func (r Result) Barrier() *BarrierResult {
	a, _ := r.Answer.(*BarrierResult)
	return a
}

// BarrierCountdowns are the countdown kind of a phase's timeout
// (countdown.go): Name is the barrier, ID the phase.
func barrierTimeoutKey(name string, phase uint64) CountdownKey {
	return CountdownKey{Kind: CountdownBarrier, Name: name, ID: phase}
}

func barrierTimeoutCountdown(name string, b *barrier) Countdown {
	return Countdown{Key: barrierTimeoutKey(name, b.phase), After: b.timeout,
		Fire: &BarrierTimeout{Name: name, Phase: b.phase, Started: b.firstAt}}
}

// eachCountdown visits the timeouts of the phases under way.
func (bs *barrierState) eachCountdown(f func(Countdown)) {
	for name, b := range bs.byName.all() {
		if b.timeout > 0 && b.firstAt != 0 && b.open() {
			f(barrierTimeoutCountdown(name, b))
		}
	}
}

func (bs *barrierState) view(name string, b *barrier) BarrierInfo {
	v := BarrierInfo{Name: name, Kind: b.kind, Parties: b.parties, Timeout: b.timeout, CreatedAt: nanosTime(b.createdAt),
		Phase: b.phase, Arrived: b.arrived(), StartedAt: nanosTime(b.firstAt), Tripped: b.tripped,
		Ends: slices.Clone(b.ends), Trips: b.trips, Broken: b.broken}
	for _, a := range b.arrivals {
		v.Arrivals = append(v.Arrivals, BarrierParty{Participant: a.participant, LeaseID: a.lease, ArrivedAt: nanosTime(a.at)})
	}
	return v
}

// endOf is how phase ended, if b still remembers.
func (b *barrier) endOf(phase uint64) *PhaseEnd {
	for i := range b.ends {
		if b.ends[i].Phase == phase {
			e := b.ends[i]
			return &e
		}
	}
	return nil
}

// result is the answer of a command that acted in phase of name.
func (bs *barrierState) result(name string, b *barrier, phase uint64) *BarrierResult {
	return &BarrierResult{Barrier: bs.view(name, b), Phase: phase, End: b.endOf(phase)}
}

func (bs *barrierState) of(name string, kind leasehold.BarrierKind) (*barrier, error) {
	if err := leasehold.ValidateBarrierName(name); err != nil {
		return nil, err
	}
	b := bs.byName.at(name)
	if b == nil {
		return nil, leasehold.Errorf(leasehold.CodeNotFound, "barrier %q does not exist; create it first", name)
	}
	if kind != 0 && b.kind != kind {
		verb := "arrive at it"
		if kind == leasehold.BarrierLatch {
			verb = "count it down"
		}
		return nil, leasehold.Errorf(leasehold.CodeConflict, "barrier %q is a %v barrier: cannot %s", name, b.kind, verb)
	}
	b, _ = bs.byName.mut(name) // the callers change it
	return b, nil
}

// phaseCheck refuses a command for a phase that is not the current one.
func phaseCheck(name string, b *barrier, phase uint64) error {
	switch {
	case phase == 0 || phase == b.phase:
		return nil
	case phase > b.phase:
		return leasehold.Errorf(leasehold.CodeInvalid, "barrier %q is at phase %d; phase %d has not begun", name, b.phase, phase)
	}
	how := "ended"
	if e := b.endOf(phase); e != nil {
		how = e.Outcome.String()
	}
	return leasehold.Errorf(leasehold.CodeStaleToken, "phase %d of barrier %q has %s; it is at phase %d", phase, name, how, b.phase)
}

func (bs *barrierState) create(now int64, c *BarrierCreate) Result {
	if err := leasehold.ValidateBarrierName(c.Name); err != nil {
		return Result{Err: err}
	}
	if c.Type != leasehold.BarrierCyclic && c.Type != leasehold.BarrierLatch {
		return Result{Err: leasehold.Errorf(leasehold.CodeInvalid, "kind %d is not a barrier kind (cyclic or latch)", c.Type)}
	}
	if err := leasehold.ValidateBarrierParties(int(c.Parties)); err != nil {
		return Result{Err: err}
	}
	if err := leasehold.ValidateBarrierTimeout(c.Timeout); err != nil {
		return Result{Err: err}
	}
	if b := bs.byName.at(c.Name); b != nil {
		if b.kind == c.Type && b.parties == c.Parties && b.timeout == c.Timeout {
			return Result{Dup: true, Answer: bs.result(c.Name, b, b.phase)}
		}
		return Result{Err: leasehold.Errorf(leasehold.CodeHeld,
			"barrier %q already exists as a %v barrier of %d parties with timeout %v", c.Name, b.kind, b.parties, b.timeout)}
	}
	if n := bs.byName.len(); n >= leasehold.MaxBarriers {
		return Result{Err: leasehold.Errorf(leasehold.CodeLimit,
			"there are %d barriers already (limit max_barriers %d); delete one first", n, leasehold.MaxBarriers)}
	}
	b := &barrier{kind: c.Type, parties: c.Parties, timeout: c.Timeout, createdAt: now, phase: 1}
	bs.byName.set(c.Name, b)
	bs.emit(EventBarrierCreated, c.Name, b.phase, 0, 0, "")
	return Result{Answer: bs.result(c.Name, b, b.phase)}
}

func (bs *barrierState) arrive(ix uint64, now int64, c *BarrierArrive) Result {
	s := bs.st
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := c.key(), c.sum(&s.scratch)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindBarrierArrive, sum); ok {
		return bs.retried(c.Name, r)
	}
	r := bs.doArrive(ix, now, c)
	bs.record(key, KindBarrierArrive, sum, now, r)
	return r
}

func (bs *barrierState) doArrive(ix uint64, now int64, c *BarrierArrive) Result {
	s := bs.st
	b, err := bs.of(c.Name, leasehold.BarrierCyclic)
	if err != nil {
		return Result{Err: err}
	}
	if err := phaseCheck(c.Name, b, c.Phase); err != nil {
		return Result{Err: err}
	}
	if err := leasehold.ValidateName("participant", c.Participant, leasehold.MaxBarrierParticipantLen, true); err != nil {
		return Result{Err: err}
	}
	if i := slices.IndexFunc(b.arrivals, func(a arrival) bool { return a.participant == c.Participant }); i >= 0 {
		l := s.leases.byID.at(b.arrivals[i].lease)
		if l != nil && l.secretHash == c.SecretHash { // a retry without a request ID
			view := l.view()
			return Result{Dup: true, Lease: &view, Remaining: l.TTL, Answer: bs.result(c.Name, b, b.phase)}
		}
		return Result{Err: leasehold.Errorf(leasehold.CodeHeld,
			"participant %q already arrived at phase %d of barrier %q (lease %d): it arrives once a phase; wait for that lease to end, or use another name",
			c.Participant, b.phase, c.Name, b.arrivals[i].lease)}
	}
	if err := leasehold.ValidateDuration("ttl", c.TTL, leasehold.MinTTL, leasehold.MaxTTL); err != nil {
		return Result{Err: err}
	}
	phase := b.phase
	if b.arrived()+1 >= b.parties { // the last party: the phase trips, and its lease would end at once
		bs.started(c.Name, b, now)
		bs.emit(EventBarrierArrived, c.Name, phase, 0, 0, c.Participant)
		bs.end(ix, now, c.Name, b, leasehold.BarrierTripped, b.arrived()+1)
		return Result{Answer: bs.result(c.Name, b, phase)}
	}
	if err := s.leases.ownerLimit(c.Participant); err != nil {
		return Result{Err: err}
	}
	l := s.leases.grant(ix, now, &Acquire{Resources: []string{leasehold.BarrierPartyResource(c.Name, c.Participant)},
		Owner: c.Participant, Operation: "barrier-party", TTL: c.TTL, SecretHash: c.SecretHash, Caller: c.Caller}, "")
	b.arrivals = append(b.arrivals, arrival{participant: c.Participant, lease: l.ID, at: now})
	bs.started(c.Name, b, now)
	bs.emit(EventBarrierArrived, c.Name, phase, l.ID, 0, c.Participant)
	return Result{Lease: l, Remaining: l.TTL, Answer: bs.result(c.Name, b, phase)}
}

func (bs *barrierState) countDown(ix uint64, now int64, c *BarrierCountDown) Result {
	s := bs.st
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := c.key(), c.sum(&s.scratch)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindBarrierCountDown, sum); ok {
		return bs.retried(c.Name, r)
	}
	r := bs.doCountDown(ix, now, c)
	bs.record(key, KindBarrierCountDown, sum, now, r)
	return r
}

func (bs *barrierState) doCountDown(ix uint64, now int64, c *BarrierCountDown) Result {
	b, err := bs.of(c.Name, leasehold.BarrierLatch)
	if err != nil {
		return Result{Err: err}
	}
	if err := phaseCheck(c.Name, b, c.Phase); err != nil {
		return Result{Err: err}
	}
	if c.Count < 1 || c.Count > leasehold.MaxBarrierParties {
		return Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
			"count is %d; it must be between 1 and %d", c.Count, leasehold.MaxBarrierParties)}
	}
	phase := b.phase
	if !b.open() { // tripped already: counting down further changes nothing
		return Result{Answer: bs.result(c.Name, b, phase)}
	}
	b.counted += min(c.Count, b.parties-b.counted)
	bs.started(c.Name, b, now)
	bs.emit(EventBarrierArrived, c.Name, phase, 0, 0, "")
	if b.counted >= b.parties {
		bs.end(ix, now, c.Name, b, leasehold.BarrierTripped, b.counted)
	}
	return Result{Answer: bs.result(c.Name, b, phase)}
}

func (bs *barrierState) reset(now int64, c *BarrierReset) Result {
	s := bs.st
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := scopedKey(false, c.Caller, [32]byte{}, c.RequestID), nameSum(&s.scratch, c.RequestID, c.Name)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindBarrierReset, sum); ok {
		return bs.retried(c.Name, r)
	}
	var r Result
	if b, err := bs.of(c.Name, 0); err != nil {
		r = Result{Err: err}
	} else {
		phase := b.phase
		if b.open() {
			bs.end(0, now, c.Name, b, leasehold.BarrierReset, b.arrived())
		} else { // a tripped latch: its end is kept already
			bs.next(c.Name, b)
		}
		r = Result{Answer: bs.result(c.Name, b, phase)}
	}
	bs.record(key, KindBarrierReset, sum, now, r)
	return r
}

func (bs *barrierState) delete(now int64, c *BarrierDelete) Result {
	s := bs.st
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := scopedKey(false, c.Caller, [32]byte{}, c.RequestID), nameSum(&s.scratch, c.RequestID, c.Name)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindBarrierDelete, sum); ok {
		return r
	}
	var r Result
	if b, err := bs.of(c.Name, 0); err != nil {
		r = Result{Err: err}
	} else {
		phase := b.phase
		info := bs.view(c.Name, b)
		bs.drop(c.Name, b)
		bs.byName.del(c.Name)
		bs.emit(EventBarrierEnded, c.Name, phase, 0, 0, leasehold.BarrierDeleted.String())
		r = Result{Answer: &BarrierResult{Barrier: info, Phase: phase,
			End: &PhaseEnd{Phase: phase, Outcome: leasehold.BarrierDeleted, At: nanosTime(now), Arrived: info.Arrived}}}
	}
	bs.record(key, KindBarrierDelete, sum, now, Result{Err: r.Err, Answer: r.Answer})
	return r
}

func (bs *barrierState) timeout(now int64, c *BarrierTimeout) Result {
	b := bs.byName.at(c.Name)
	if b == nil || b.phase != c.Phase || !b.open() || b.timeout == 0 || b.firstAt == 0 || b.firstAt != c.Started {
		return Result{} // tripped, reset or deleted since the leader decided
	}
	b, _ = bs.byName.mut(c.Name)
	bs.end(0, now, c.Name, b, leasehold.BarrierTimedOut, b.arrived())
	return Result{Answer: bs.result(c.Name, b, c.Phase)}
}

// record keeps a command's answer in the dedup window: its error, or the
// phase it acted in and an arrival's lease; a retry reads the rest from
// the barrier as it is then (retried). The phase is the record's Version,
// the common field a snapshot's dedup section writes (encodeResult) and
// reads back as a *KVResult's, so a record reads alike before and after a
// restore.
func (bs *barrierState) record(key string, k Kind, sum fingerprint, now int64, r Result) {
	s := bs.st
	rec := Result{Err: r.Err, Lease: r.Lease, Remaining: r.Remaining}
	if a := r.Barrier(); a != nil {
		rec.Answer = &KVResult{Version: a.Phase}
	}
	s.dedup.put(key, k, sum, now, rec, s.cfg)
}

// retried answers a retry from its dedup record r (record).
func (bs *barrierState) retried(name string, r Result) Result {
	s := bs.st
	if r.Err != nil {
		return r
	}
	b := bs.byName.at(name)
	if b == nil {
		return Result{Dup: true, Err: leasehold.Errorf(leasehold.CodeNotFound,
			"barrier %q, which this request acted on at phase %d, has been deleted since", name, r.Version())}
	}
	out := Result{Dup: true, Answer: bs.result(name, b, r.Version())}
	if r.Lease != nil {
		if l := s.leases.byID.at(r.Lease.ID); l != nil {
			view := l.view()
			out.Lease, out.Remaining = &view, r.Remaining
		}
	}
	return out
}

// started marks the phase's first arrival or count-down, from
// which its timeout runs.
func (bs *barrierState) started(name string, b *barrier, now int64) {
	s := bs.st
	if b.firstAt != 0 {
		return
	}
	b.firstAt = now
	if b.timeout > 0 && s.hooks.timers != nil {
		s.hooks.timers.Arm(barrierTimeoutCountdown(name, b))
	}
}

// end ends b's current phase with outcome: a trip takes a token
// from the entry at ix. A cyclic barrier (and any broken phase) opens the
// next phase; a tripped latch stays tripped.
func (bs *barrierState) end(ix uint64, now int64, name string, b *barrier, outcome leasehold.BarrierOutcome, arrived uint32) {
	s := bs.st
	end := PhaseEnd{Phase: b.phase, Outcome: outcome, At: nanosTime(now), Arrived: arrived}
	if outcome == leasehold.BarrierTripped {
		end.Token = s.nextToken(ix)
		b.trips++
	} else {
		b.broken++
	}
	b.ends = append(b.ends, end)
	if n := len(b.ends) - leasehold.BarrierHistory; n > 0 {
		b.ends = slices.Delete(b.ends, 0, n)
	}
	bs.emit(EventBarrierEnded, name, end.Phase, 0, end.Token, outcome.String())
	if b.kind == leasehold.BarrierLatch && outcome == leasehold.BarrierTripped {
		b.tripped = true
		s.disarm(barrierTimeoutKey(name, b.phase))
		return
	}
	bs.next(name, b)
}

// next opens the next phase: the arrivals of this one end.
func (bs *barrierState) next(name string, b *barrier) {
	bs.drop(name, b)
	b.phase++
	b.firstAt, b.counted, b.tripped = 0, 0, false
}

// drop ends the arrivals' leases and the phase's timeout.
func (bs *barrierState) drop(name string, b *barrier) {
	s := bs.st
	s.disarm(barrierTimeoutKey(name, b.phase))
	arrivals := b.arrivals
	b.arrivals = nil // leaseEnded, called by the lease's end, finds nothing to withdraw
	for _, a := range arrivals {
		if l := s.leases.byID.at(a.lease); l != nil {
			s.leases.end(l, EndReleased)
		}
	}
}

// leaseEnded withdraws the arrival of a party whose lease ended before
// its phase tripped.
func (bs *barrierState) leaseEnded(l *lease) {
	name, participant, ok := leasehold.BarrierPartyOf(l.Resources[0])
	if !ok {
		return
	}
	b := bs.byName.at(name)
	if b == nil || !slices.ContainsFunc(b.arrivals, func(a arrival) bool { return a.lease == l.ID }) {
		return
	}
	b, _ = bs.byName.mut(name)
	b.arrivals = slices.DeleteFunc(b.arrivals, func(a arrival) bool { return a.lease == l.ID })
	bs.emit(EventBarrierWithdrawn, name, b.phase, l.ID, 0, participant)
}

// emit reports a change of barrier name in phase: an arrival or
// withdrawal names the party (who) and its lease, an end its outcome
// (who) and, tripped, its token. The barrier is the event's key, and the
// prefix of its parties' resources its resource, so a watch of either
// sees it.
func (bs *barrierState) emit(k EventKind, name string, phase, lease, token uint64, who string) {
	s := bs.st
	if s.hooks.sink == nil {
		return
	}
	e := Event{Kind: k, Resources: []string{leasehold.BarrierPartyResource(name, "")}, Key: name, Version: phase,
		LeaseID: lease, Token: token}
	if k == EventBarrierEnded {
		e.Operation = who
	} else {
		e.Owner = who
	}
	s.emit(e)
}

// BarrierGet returns the barrier name, if it exists.
func (s *State) BarrierGet(name string) (BarrierInfo, bool) {
	b := s.barriers.byName.at(name)
	if b == nil {
		return BarrierInfo{}, false
	}
	return s.barriers.view(name, b), true
}

// BarrierPhase says how phase of name stands: ended (end set), under way
// (nil, nil), or an error (no such barrier or phase; one ended before the
// ends kept). Phase 0 is the current phase.
func (s *State) BarrierPhase(name string, phase uint64) (BarrierInfo, *PhaseEnd, error) {
	b := s.barriers.byName.at(name)
	if b == nil {
		return BarrierInfo{}, nil, leasehold.Errorf(leasehold.CodeNotFound, "barrier %q does not exist", name)
	}
	if phase == 0 {
		phase = b.phase
	}
	v := s.barriers.view(name, b)
	if e := b.endOf(phase); e != nil {
		return v, e, nil
	}
	switch {
	case phase == b.phase:
		return v, nil, nil
	case phase > b.phase:
		return v, nil, leasehold.Errorf(leasehold.CodeInvalid, "barrier %q is at phase %d; phase %d has not begun", name, b.phase, phase)
	}
	return v, nil, leasehold.Errorf(leasehold.CodeNotFound,
		"phase %d of barrier %q ended before the last %d phases it keeps", phase, name, leasehold.BarrierHistory)
}

// BarrierList returns up to limit barriers starting with prefix, after
// the name after, in name order, without their arrivals.
func (s *State) BarrierList(prefix, after string, limit int) []BarrierInfo {
	var names []string
	for name := range s.barriers.byName.all() {
		if strings.HasPrefix(name, prefix) && name > after {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if limit > 0 && len(names) > limit {
		names = names[:limit]
	}
	out := make([]BarrierInfo, 0, len(names))
	for _, name := range names {
		v := s.barriers.view(name, s.barriers.byName.at(name))
		v.Arrivals = nil
		out = append(out, v)
	}
	return out
}

// BarrierStats counts the barriers, the parties arrived at them (leases
// held), and the phases tripped and broken in all.
type BarrierStats struct {
	Barriers, Arrived int
	Trips, Broken     uint64
}

// BarrierStats is the barriers' counts, for metrics.
func (s *State) BarrierStats() BarrierStats {
	var st BarrierStats
	for _, b := range s.barriers.byName.all() {
		st.Barriers++
		st.Arrived += int(b.arrived())
		st.Trips += b.trips
		st.Broken += b.broken
	}
	return st
}
