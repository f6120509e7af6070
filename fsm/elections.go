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

func (c *Campaign) apply(s *State, ix uint64, now int64) Result {
	c.Election = true
	return s.acquire(ix, now, &c.Acquire)
}

func (c *Proclaim) apply(s *State, _ uint64, now int64) Result { return s.proclaim(now, c) }

func (c *Campaign) encode(e *encoder) {
	c.Acquire.encodeBody(e)
	e.str(string(c.Value))
}

func (c *Campaign) decode(d *decoder) {
	c.Acquire.decode(d)
	c.Election, c.Value = true, []byte(d.str())
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

// validateCampaign adds an election's own rules to an acquire's.
func validateCampaign(c *Acquire) error {
	if !c.Election {
		return nil
	}
	if len(c.Resources) != 1 {
		return leasehold.Errorf(leasehold.CodeInvalid, "a campaign names one election, not %d", len(c.Resources))
	}
	return validElectionValue(c.Value)
}

func validElectionValue(v []byte) error {
	if len(v) > MaxElectionValue {
		return leasehold.Errorf(leasehold.CodeInvalid, "the election value is %d bytes; the limit is %d", len(v), MaxElectionValue)
	}
	return nil
}

// kindConflict refuses a lock acquire of an election's name, and a
// campaign for a name held or awaited as a lock.
func (s *State) kindConflict(c *Acquire) error {
	for _, r := range c.Resources {
		election, used := false, false
		if id, held := s.holders.get(r); held {
			election, used = s.leases.at(id).election(), true
		} else if q := s.queues[r]; len(q) > 0 {
			election, used = q[0].Election, true
		}
		switch {
		case !used || election == c.Election:
		case election:
			return leasehold.Errorf(leasehold.CodeInvalid,
				"%q is an election: campaign for it instead of acquiring it as a lock", r)
		default:
			return leasehold.Errorf(leasehold.CodeInvalid,
				"%q is held or awaited as a lock, so it cannot be an election; choose another name", r)
		}
	}
	return nil
}

func (s *State) proclaim(now int64, c *Proclaim) Result {
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
		l, err := s.holderOf(c.LeaseID, c.SecretHash, "proclaim with")
		if err != nil {
			return Result{Err: err}
		}
		if !l.election() {
			return Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
				"lease %d holds a lock, not an election: there is nothing to proclaim", l.ID)}
		}
		l, _ = s.leases.mut(l.ID)
		l.setMore().value = c.Value
		s.emitLeader(l)
		view := l.view()
		return Result{Lease: &view}
	}()
	s.dedup.put(key, KindProclaim, sum, now, r, s.cfg)
	return r
}

// emitLeader reports l as its election's leader.
func (s *State) emitLeader(l *lease) {
	if s.sink != nil {
		s.emit(Event{Kind: EventLeaderChanged, LeaseID: l.ID, Token: l.Token, Resources: l.Resources,
			Owner: l.Owner, Operation: l.Operation, Value: l.more().value})
	}
}

// flushVacated reports, after a command, each election whose leader ended
// in it and that nobody took over in the same command.
func (s *State) flushVacated() {
	for _, name := range s.vacated {
		if _, held := s.holders.get(name); !held && s.sink != nil {
			s.emit(Event{Kind: EventLeaderChanged, Resources: []string{name}})
		}
	}
	s.vacated = s.vacated[:0]
}

// Election is what anyone may see of an election (leasehold/elections.go).
type Election = leasehold.Election

// Leader returns the election named name, if it has a leader or
// candidates.
func (s *State) Leader(name string) (Election, bool) {
	e := Election{Name: name, Candidates: len(s.queues[name])}
	if id, held := s.holders.get(name); held {
		l := s.leases.at(id)
		if !l.election() {
			return Election{}, false
		}
		e.LeaseID, e.Token, e.Value, e.Owner, e.Since = l.ID, l.Token, l.more().value, l.Owner, nanosTime(l.acquiredAt)
		return e, true
	}
	if q := s.queues[name]; len(q) > 0 && q[0].Election {
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
	names := map[string]bool{}
	// The elections with a leader, from their index: not a walk over
	// every lease (a node holding a million would stall Apply for it on
	// every metrics scrape).
	for r := range s.led {
		if id, held := s.holders.get(r); held && r > after && s.leases.at(id).election() && hasPrefix([]string{r}, prefix) {
			names[r] = true
		}
	}
	for r, q := range s.queues {
		if r > after && q[0].Election && hasPrefix([]string{r}, prefix) {
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
