package leasehold

import (
	"strings"
	"time"
)

// Barriers (docs/barriers.md): the vocabulary and limits that the API
// edge, the state machine, the client and the CLI share.
//
// A barrier has a fixed number of parties and runs in phases numbered
// from 1 (Java's Phaser calls it a phase, CyclicBarrier a generation). A
// cyclic barrier trips when its parties have all arrived, each arrival
// bound to a lease of its own, and opens the next phase at once. A latch
// (CountDownLatch) trips when it has been counted down parties times and
// stays tripped until it is reset. Every phase ends one way (an
// outcome): it trips, or its timeout passes, or it is reset.

// Limits of barriers.
const (
	MaxBarrierNameLen        = MaxResourceLen
	MaxBarrierParticipantLen = MaxOwnerLen
	MaxBarrierParties        = 10000 // parties of one barrier (a latch's count)
	MaxBarriers              = 10000 // barriers in all
	MinBarrierTimeout        = time.Second
	MaxBarrierTimeout        = 24 * time.Hour
	// BarrierHistory is how many ended phases a barrier remembers: a Wait
	// for a phase older than those is answered NotFound.
	BarrierHistory = 8
)

// BarrierKind says how a barrier counts.
type BarrierKind uint8

const (
	// BarrierCyclic: parties arrive (each bound to a lease); it trips when
	// all have arrived and opens the next phase.
	BarrierCyclic BarrierKind = iota + 1
	// BarrierLatch: it is counted down; it trips at zero and stays tripped
	// until reset.
	BarrierLatch
)

func (k BarrierKind) String() string {
	switch k {
	case BarrierCyclic:
		return "cyclic"
	case BarrierLatch:
		return "latch"
	}
	return "unknown"
}

// BarrierOutcome is how a phase ended.
type BarrierOutcome uint8

const (
	BarrierTripped  BarrierOutcome = iota + 1 // every party arrived (a latch: counted to zero)
	BarrierTimedOut                           // its timeout passed first: it is broken
	BarrierReset                              // it was reset before it tripped: broken too
	BarrierDeleted                            // the barrier was deleted (never kept: there is no barrier left to keep it)
)

func (o BarrierOutcome) String() string {
	switch o {
	case BarrierTripped:
		return "tripped"
	case BarrierTimedOut:
		return "timed_out"
	case BarrierReset:
		return "reset"
	case BarrierDeleted:
		return "deleted"
	}
	return "unknown"
}

// barrierParties starts an arriving party's lease resource.
const barrierParties = ReservedPrefix + "barrier/"

// BarrierPartyResource is the resource of participant's arrival lease at
// barrier: "@leasehold/barrier/NAME/PARTICIPANT", the name escaped as a
// group's is (GroupSessionResource). With participant "" it is the
// prefix of the barrier's arrivals, and the resource of its own events.
func BarrierPartyResource(barrier, participant string) string {
	return barrierParties + groupEscaper.Replace(barrier) + "/" + participant
}

// BarrierPartyOf is the barrier and participant an arrival lease's
// resource names; ok is false for a name BarrierPartyResource does not
// make.
func BarrierPartyOf(resource string) (barrier, participant string, ok bool) {
	rest, ok := strings.CutPrefix(resource, barrierParties)
	if !ok {
		return "", "", false
	}
	escaped, participant, ok := strings.Cut(rest, "/")
	barrier = groupUnescaper.Replace(escaped)
	if !ok || participant == "" || groupEscaper.Replace(barrier) != escaped {
		return "", "", false
	}
	return barrier, participant, true
}

// ValidateBarrierName checks a barrier's name: a resource name, not under
// ReservedPrefix.
func ValidateBarrierName(name string) error {
	if err := ValidateName("barrier", name, MaxBarrierNameLen, true); err != nil {
		return err
	}
	return Reserved("barrier", name)
}

// ValidateBarrierParties checks a barrier's party count (a latch's count).
func ValidateBarrierParties(n int) error {
	if n < 1 || n > MaxBarrierParties {
		return Errorf(CodeInvalid, "parties is %d; it must be between 1 and %d (limit max_barrier_parties)", n, MaxBarrierParties)
	}
	return nil
}

// ValidateBarrierTimeout checks a phase timeout (0: none).
func ValidateBarrierTimeout(d time.Duration) error {
	if d == 0 {
		return nil
	}
	return ValidateDuration("timeout", d, MinBarrierTimeout, MaxBarrierTimeout)
}
