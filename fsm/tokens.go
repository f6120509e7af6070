package fsm

import "github.com/leasehold/leasehold/api/leasehold"

// KindRaiseTokens is the command that lifts the token counter to a floor.
const KindRaiseTokens Kind = 11

// RaiseTokens makes every fencing token issued after it at least Floor. A
// new leader proposes it with the token floor its node keeps apart from the
// log: if a disk lost acknowledged entries off the log's end, the tokens
// they granted are gone from the state but still held by their holders, and
// must never be issued again. As a command it reaches every replica alike,
// and the raised counter is in every snapshot from then on.
type RaiseTokens struct {
	Floor uint64
}

func (*RaiseTokens) Kind() Kind { return KindRaiseTokens }

func (c *RaiseTokens) apply(s *State, _ uint64, _ int64) Result { return s.raiseTokens(c) }

func (c *RaiseTokens) encode(e *encoder) { e.uvarint(c.Floor) }
func (c *RaiseTokens) decode(d *decoder) { c.Floor = d.uvarint() }

// MaxTokenFloor is the largest floor RaiseTokens takes: tokens stay within
// a signed 64-bit column (pgfence stores them as bigint), and the counter
// can never wrap around to reuse a token.
const MaxTokenFloor = 1<<63 - 1

func (s *State) raiseTokens(c *RaiseTokens) Result {
	if c.Floor > MaxTokenFloor {
		return Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
			"token floor %d is above the largest token %d: the floor is damaged", c.Floor, uint64(MaxTokenFloor))}
	}
	if c.Floor > 0 && c.Floor-1 > s.lastToken {
		s.lastToken = c.Floor - 1
	}
	return Result{}
}
