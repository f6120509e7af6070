package fsm

import (
	"sort"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Elections: an election named E is a lease on the one resource E, marked
// as an election and carrying the leader's value. Campaigning is a waiting
// acquire, so candidates lead in arrival order (the FIFO waiters); the
// leadership lease's token is the term's token, and leadership renews,
// expires and is released like any lease. A name is either an election or
// a lock: an acquire of a name held or awaited as the other kind is
// refused, so a lock holder never becomes a "leader" by accident.
//
// Each change of leader is an EventLeaderChanged at the index it happened:
// a grant reports the new leader; an end with nobody granted in the same
// command reports no leader (LeaseID 0). Proclaim changes the value
// without giving up leadership and reports it the same way.

const (
	KindCampaign Kind = 13
	KindProclaim Kind = 14
)

// MaxElectionValue bounds a leader's value (leasehold/elections.go).
const MaxElectionValue = leasehold.MaxElectionValue

// Campaign asks to lead the election Resources[0] with Value, waiting up
// to Wait (in arrival order) if another candidate leads. It is an Acquire
// in every other way; its lease is the leadership.
type Campaign struct {
	Acquire
	Value []byte
}

// Proclaim changes the leader's value; only the leader can.
type Proclaim struct {
	RequestID  string
	LeaseID    uint64
	SecretHash [32]byte
	Value      []byte
	Caller     string // see Acquire.Caller
}

func (*Campaign) Kind() Kind { return KindCampaign }
func (*Proclaim) Kind() Kind { return KindProclaim }

func (c *Campaign) apply(s *State, ix uint64, now int64) Result { return s.leases.acquire(ix, now, c) }
func (c *Proclaim) apply(s *State, _ uint64, now int64) Result  { return s.elections.proclaim(now, c) }

func (c *Campaign) encode(e *encoder) {
	c.Acquire.encodeBody(e)
	e.str(string(c.Value))
}

func (c *Campaign) decode(d *decoder) {
	c.Acquire.decode(d)
	c.Value = []byte(d.str())
}

// A campaign's ask: one name, as an election.

func (c *Campaign) sum(e *encoder) fingerprint {
	if !e.startSum(c.legacy, c.RequestID) {
		return fingerprint{}
	}
	c.encodeAsk(e)
	e.bool(true)
	e.str(string(c.Value))
	return sumOf(e)
}

func (c *Campaign) check() error {
	if len(c.Resources) != 1 {
		return leasehold.Errorf(leasehold.CodeInvalid, "a campaign names one election, not %d", len(c.Resources))
	}
	return validElectionValue(c.Value)
}

func (c *Campaign) conflict(ls *leaseState) error {
	if err := ls.st.sems.lockConflict(c.Resources); err != nil {
		return err
	}
	return ls.st.elections.conflict(c.Resources, true)
}

func (c *Campaign) blocker(ls *leaseState, w *waiter) error { return ls.blocker(c.Resources, w) }

func (c *Campaign) take(_ *leaseState, rare leaseRare) ([]string, leaseRare) {
	rare.election, rare.value = true, c.Value
	return c.Resources, rare
}

func (*Campaign) joined(*leaseState) {}
func (*Campaign) left(*leaseState)   {}
func (*Campaign) next() bool         { return false }

func (c *Campaign) clone() Ask {
	d := *c
	return &d
}

func (c *Proclaim) encode(e *encoder) {
	e.str(c.RequestID)
	e.uvarint(c.LeaseID)
	e.hash(c.SecretHash)
	e.str(string(c.Value))
	e.str(c.Caller)
}

func (c *Proclaim) decode(d *decoder) {
	c.RequestID = d.str()
	c.LeaseID = d.uvarint()
	c.SecretHash = d.hash()
	c.Value = []byte(d.str())
	c.Caller = d.str() // newer than caller scoping: never legacy
}

func (c *Proclaim) key() string { return requestKey(c.Caller, c.SecretHash, c.RequestID) }

func (c *Proclaim) sum(e *encoder) fingerprint {
	if !e.startSum(false, c.RequestID) { // never legacy
		return fingerprint{}
	}
	e.uvarint(c.LeaseID)
	e.str(string(c.Value))
	return sumOf(e)
}

func validElectionValue(v []byte) error {
	if len(v) > MaxElectionValue {
		return leasehold.Errorf(leasehold.CodeInvalid, "the election value is %d bytes; the limit is %d", len(v), MaxElectionValue)
	}
	return nil
}

// The election sub-state. An election has no map of its own: its leader
// is a lease marked as an election's (leaseRare.election, with the value)
// and its candidates are waiting campaigns. It keeps an index of the
// elections with a leader, and the elections whose leader ended in the
// command being applied, to report them after it.
type electionState struct {
	st *State
	// led are the elections with a leader: the resources held by an
	// election lease (granted, restored; a leader's end takes its name
	// out unless an election lease holds it again), so listing them reads
	// the elections, not every lease.
	led     map[string]struct{}
	vacated []string
}

func (es *electionState) init(s *State)              { *es = electionState{st: s, led: make(map[string]struct{})} }
func (es *electionState) captureInto(v *State)       { v.elections = electionState{st: v} }
func (*electionState) eachCountdown(func(Countdown)) {}

// leaseEnded takes an ended leader's election out of the index, and
// keeps it to report after the command.
func (es *electionState) leaseEnded(l *lease) {
	if l.election() {
		ls := &es.st.leases
		if id, held := ls.holders.get(l.Resources[0]); !held || !ls.byID.at(id).election() {
			delete(es.led, l.Resources[0])
		}
		es.vacated = append(es.vacated, l.Resources[0])
	}
}

// granted puts the election of a new leader's lease l in the index.
func (es *electionState) granted(l *lease) { es.led[l.Resources[0]] = struct{}{} }

// conflict refuses a lock acquire (election false) of an election's name,
// and a campaign for a name held or awaited as a lock.
func (es *electionState) conflict(resources []string, election bool) error {
	ls := &es.st.leases
	for _, r := range resources {
		isElection, used := false, false
		if id, held := ls.holders.get(r); held {
			isElection, used = ls.byID.at(id).election(), true
		} else if q := ls.lines[r]; len(q) > 0 {
			isElection, used = q[0].campaign(), true
		}
		switch {
		case !used || isElection == election:
		case isElection:
			return leasehold.Errorf(leasehold.CodeInvalid,
				"%q is an election: campaign for it instead of acquiring it as a lock", r)
		default:
			return leasehold.Errorf(leasehold.CodeInvalid,
				"%q is held or awaited as a lock, so it cannot be an election; choose another name", r)
		}
	}
	return nil
}

func (es *electionState) proclaim(now int64, c *Proclaim) Result {
	s := es.st
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := c.key(), c.sum(&s.scratch)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindProclaim, sum); ok {
		return r
	}
	r := func() Result {
		if err := validElectionValue(c.Value); err != nil {
			return Result{Err: err}
		}
		l, err := s.leases.holderOf(c.LeaseID, c.SecretHash, "proclaim with")
		if err != nil {
			return Result{Err: err}
		}
		if !l.election() {
			return Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
				"lease %d holds a lock, not an election: there is nothing to proclaim", l.ID)}
		}
		l, _ = s.leases.byID.mut(l.ID)
		l.setMore().value = c.Value
		es.emitLeader(l)
		view := l.view()
		return Result{Lease: &view}
	}()
	s.dedup.put(key, KindProclaim, sum, now, r, s.cfg)
	return r
}

// emitLeader reports l as its election's leader.
func (es *electionState) emitLeader(l *lease) {
	if s := es.st; s.hooks.sink != nil {
		s.emit(Event{Kind: EventLeaderChanged, LeaseID: l.ID, Token: l.Token, Resources: l.Resources,
			Owner: l.Owner, Operation: l.Operation, Value: l.more().value})
	}
}

// afterCommand reports, after each command, every election whose leader
// ended in it and that nobody took over in the same command.
func (es *electionState) afterCommand() {
	if len(es.vacated) == 0 {
		return
	}
	s := es.st
	for _, name := range es.vacated {
		if _, held := s.leases.holders.get(name); !held && s.hooks.sink != nil {
			s.emit(Event{Kind: EventLeaderChanged, Resources: []string{name}})
		}
	}
	es.vacated = es.vacated[:0]
}

// Election is what anyone may see of an election (leasehold/elections.go).
type Election = leasehold.Election

// Leader returns the election named name, if it has a leader or
// candidates.
func (s *State) Leader(name string) (Election, bool) {
	ls := &s.leases
	e := Election{Name: name, Candidates: len(ls.lines[name])}
	if id, held := ls.holders.get(name); held {
		l := ls.byID.at(id)
		if !l.election() {
			return Election{}, false
		}
		e.LeaseID, e.Token, e.Value, e.Owner, e.Since = l.ID, l.Token, l.more().value, l.Owner, nanosTime(l.acquiredAt)
		return e, true
	}
	if q := ls.lines[name]; len(q) > 0 && q[0].campaign() {
		return e, true
	}
	return Election{}, false
}

// Elections lists every election with a leader or candidates whose name
// starts with prefix, by name.
func (s *State) Elections(prefix string) []Election {
	out, _ := s.ElectionsPage(prefix, "", -1)
	return out
}

// ElectionsPage lists, by name, up to limit (-1: all) elections with a
// leader or candidates whose name starts with prefix and sorts after
// after, and says whether more follow. Only the page's leaders are read.
func (s *State) ElectionsPage(prefix, after string, limit int) (out []Election, more bool) {
	ls := &s.leases
	names := map[string]bool{}
	// The elections with a leader, from their index: not a walk over
	// every lease (a node holding a million would stall Apply for it on
	// every metrics scrape).
	for r := range s.elections.led {
		if id, held := ls.holders.get(r); held && r > after && ls.byID.at(id).election() && hasPrefix([]string{r}, prefix) {
			names[r] = true
		}
	}
	for r, q := range ls.lines {
		if r > after && q[0].campaign() && hasPrefix([]string{r}, prefix) {
			names[r] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for r := range names {
		sorted = append(sorted, r)
	}
	sort.Strings(sorted)
	if limit >= 0 && len(sorted) > limit {
		sorted, more = sorted[:limit], true
	}
	out = make([]Election, len(sorted))
	for i, r := range sorted {
		out[i], _ = s.Leader(r)
	}
	return out, more
}
