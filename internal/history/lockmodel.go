package history

import (
	"fmt"
	"math"
	"sort"

	"github.com/anishathalye/porcupine"
)

// LockOp is an operation on a lease in the porcupine lock model.
type LockOp uint8

const (
	LockAcquire LockOp = iota
	LockRenew
	LockRelease
)

func (o LockOp) String() string { return [...]string{"acquire", "renew", "release"}[o] }

// LockResult is what a lock operation answered.
type LockResult uint8

const (
	LockOK LockResult = iota
	LockHeld
	LockNotFound
	LockUnknown // no answer: it may or may not have taken effect
)

func (r LockResult) String() string { return [...]string{"ok", "held", "not_found", "unknown"}[r] }

// LockIn and LockOut are porcupine inputs and outputs for one resource.
type LockIn struct {
	Op       LockOp
	Resource string
	Lease    uint64 // renew, release, and a granted acquire
}

type LockOut struct {
	Res   LockResult
	Token uint64 // granted acquire
}

// lockState is one resource in the model. holder 0 means free;
// unknownHolder a grant whose requester never learned of it.
type lockState struct {
	holder uint64
	last   uint64 // largest token known to be granted
}

const unknownHolder = math.MaxUint64

// LockModel is a lock whose holder may expire at any moment (the TTL rule
// is checked on timestamps by Exclusion): a grant needs a free resource and
// a larger token, renew and release succeed only for the holder, and a
// lease no longer held answers not-found. An operation without an answer
// gets Return math.MaxInt64: it may take effect at any later time.
var LockModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			r := op.Input.(LockIn).Resource
			if _, ok := by[r]; !ok {
				keys = append(keys, r)
			}
			by[r] = append(by[r], op)
		}
		sort.Strings(keys)
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() []any { return []any{lockState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(lockState), input.(LockIn), output.(LockOut)
		pre := []lockState{s}
		if s.holder != 0 {
			pre = append(pre, lockState{last: s.last}) // it expired first
		}
		var next []any
		for _, p := range pre {
			switch in.Op {
			case LockAcquire:
				switch out.Res {
				case LockOK:
					if p.holder == 0 && out.Token > p.last {
						next = append(next, lockState{holder: in.Lease, last: out.Token})
					}
				case LockHeld:
					if p.holder != 0 {
						next = append(next, p)
					}
				default: // unknown: granted to nobody we know of, or nothing
					next = append(next, p)
					if p.holder == 0 {
						next = append(next, lockState{holder: unknownHolder, last: p.last})
					}
				}
			case LockRenew:
				switch out.Res {
				case LockOK:
					if p.holder == in.Lease {
						next = append(next, p)
					}
				case LockNotFound:
					if p.holder != in.Lease {
						next = append(next, p)
					}
				default:
					next = append(next, p)
				}
			case LockRelease:
				switch out.Res {
				case LockOK:
					if p.holder == in.Lease {
						next = append(next, lockState{last: p.last})
					}
				case LockNotFound:
					if p.holder != in.Lease {
						next = append(next, p)
					}
				default:
					next = append(next, p)
					if p.holder == in.Lease {
						next = append(next, lockState{last: p.last})
					}
				}
			}
		}
		return next
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(LockIn), output.(LockOut)
		if in.Op == LockAcquire && out.Res == LockOK {
			return fmt.Sprintf("acquire(%s) -> lease %d token %d", in.Resource, in.Lease, out.Token)
		}
		return fmt.Sprintf("%s(%s, %d) -> %s", in.Op, in.Resource, in.Lease, out.Res)
	},
	DescribeState: func(state any) string {
		s := state.(lockState)
		return fmt.Sprintf("holder=%d last=%d", s.holder, s.last)
	},
}
