package cliout

import "github.com/leasehold/leasehold/client"

// The barriers' structures.

// Barrier is a barrier or latch: barrier create, barrier show, and each
// of barrier list.
type Barrier struct {
	Barrier   string         `json:"barrier"`
	Kind      string         `json:"kind"`
	Parties   int            `json:"parties"`
	Timeout   string         `json:"timeout,omitempty"` // left out: none
	Phase     uint64         `json:"phase"`
	Arrived   int            `json:"arrived"`
	Tripped   bool           `json:"tripped"`
	StartedAt string         `json:"started_at,omitempty"`
	CreatedAt string         `json:"created_at,omitempty"`
	Trips     uint64         `json:"trips"`
	Broken    uint64         `json:"broken"`
	Arrivals  []BarrierParty `json:"arrivals,omitempty"`
	Ends      []PhaseEnd     `json:"ends"`
}

// BarrierParty is an arrival of the current phase.
type BarrierParty struct {
	Participant string `json:"participant"`
	LeaseID     uint64 `json:"lease_id"`
	ArrivedAt   string `json:"arrived_at"`
}

// PhaseEnd is how a phase ended: tripped (with its fencing token),
// timed_out or reset.
type PhaseEnd struct {
	Phase   uint64 `json:"phase"`
	Outcome string `json:"outcome"`
	Token   uint64 `json:"token,omitempty"`
	EndedAt string `json:"ended_at,omitempty"`
	Arrived int    `json:"arrived"`
}

// Barriers is barrier list's output.
type Barriers struct {
	Barriers []Barrier `json:"barriers"`
}

// PhaseEnded is barrier arrive's, wait's and reset's output: the barrier
// and how the phase ended.
type PhaseEnded struct {
	Barrier string `json:"barrier"`
	PhaseEnd
}

// CountedDown is barrier count-down's output.
type CountedDown struct {
	Barrier string `json:"barrier"`
	Phase   uint64 `json:"phase"`
	Counted int    `json:"counted"`
	Parties int    `json:"parties"`
	Tripped bool   `json:"tripped"`
	Token   uint64 `json:"token,omitempty"` // tripped: the trip's token
}

// BarrierDeleted is barrier delete's output.
type BarrierDeleted struct {
	Barrier string `json:"barrier"`
	Deleted bool   `json:"deleted"`
}

// FromBarrier is b as printed.
func FromBarrier(b client.Barrier) Barrier {
	out := Barrier{Barrier: b.Name, Kind: b.Kind, Parties: b.Parties, Timeout: DurSet(b.Timeout), Phase: b.Phase,
		Arrived: b.Arrived, Tripped: b.Tripped, StartedAt: Time(b.StartedAt), CreatedAt: Time(b.CreatedAt),
		Trips: b.Trips, Broken: b.Broken, Ends: []PhaseEnd{}}
	for _, a := range b.Arrivals {
		out.Arrivals = append(out.Arrivals, BarrierParty{Participant: a.Participant, LeaseID: a.LeaseID, ArrivedAt: Time(a.ArrivedAt)})
	}
	for _, e := range b.Ends {
		out.Ends = append(out.Ends, FromPhaseEnd(e))
	}
	return out
}

// FromBarriers is barrier list's output.
func FromBarriers(bs []client.Barrier) Barriers {
	out := Barriers{Barriers: []Barrier{}}
	for _, b := range bs {
		out.Barriers = append(out.Barriers, FromBarrier(b))
	}
	return out
}

// FromPhaseEnd is e as printed.
func FromPhaseEnd(e client.PhaseEnd) PhaseEnd {
	return PhaseEnd{Phase: e.Phase, Outcome: e.Outcome, Token: e.Token, EndedAt: Time(e.At), Arrived: e.Arrived}
}
