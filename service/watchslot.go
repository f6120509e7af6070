package service

import "github.com/leasehold/leasehold/fsm"

// slot is an event as the hub's ring keeps it: 96 bytes instead of an
// fsm.Event's 152. The ring holds 100,000 of them by default, and lease
// events (grants, renewals, ends: most of a busy node's history) fit
// whole; the fields only KV and group events use are kept behind more.
type slot struct {
	Index     uint64
	LeaseID   uint64
	Token     uint64
	Resources []string
	Owner     string
	Operation string
	Partition uint32
	Kind      fsm.EventKind
	Reason    fsm.EndReason
	more      *slotMore
}

type slotMore struct {
	key     string
	value   []byte
	version uint64
	group   string
}

func slotOf(e *fsm.Event) slot {
	s := slot{Index: e.Index, LeaseID: e.LeaseID, Token: e.Token, Resources: e.Resources, Owner: e.Owner,
		Operation: e.Operation, Partition: e.Partition, Kind: e.Kind, Reason: e.Reason}
	if e.Key != "" || e.Value != nil || e.Version != 0 || e.Group != "" {
		s.more = &slotMore{key: e.Key, value: e.Value, version: e.Version, group: e.Group}
	}
	return s
}

// event is the Event the slot keeps.
func (s *slot) event() Event {
	e := Event{Index: s.Index, LeaseID: s.LeaseID, Token: s.Token, Resources: s.Resources, Owner: s.Owner,
		Operation: s.Operation, Partition: s.Partition, Kind: s.Kind.String()}
	if s.Reason != 0 {
		e.Reason = s.Reason.String()
	}
	if m := s.more; m != nil {
		e.Key, e.Value, e.Version, e.Group = m.key, m.value, m.version, m.group
	}
	return e
}

func (s *slot) key() string {
	if s.more == nil {
		return ""
	}
	return s.more.key
}

// bytes is what the slot's keys, values and names hold (HubConfig.Bytes).
func (s *slot) bytes() int {
	n := len(s.Owner) + len(s.Operation)
	for _, r := range s.Resources {
		n += len(r)
	}
	if m := s.more; m != nil {
		n += len(m.key) + len(m.value) + len(m.group)
	}
	return n
}
