package history

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Transactions on overlapping keys, checked against a model of a
// multi-key register with compare-and-set: every Txn is one operation
// (version compares on some of TxnKeys keys, puts of each compared key if
// all hold, else maybe one put of another key; a plain put is a Txn with
// no compare) and every Get another. Every value names the transaction
// that wrote it ("t<id>"), so a value read identifies its write, and the
// version a read shows gives the index of a transaction whose answer was
// lost. Keys come in groups of TxnKeys, checked apart.

// TxnKeys is the number of keys in one register group.
const TxnKeys = 4

type TxnCmp struct {
	Key     int
	Version uint64 // CompareVersionEqual; 0: absent
}

// TxnIn is one operation: a read of Read, or (Read -1) transaction ID.
type TxnIn struct {
	Op    int64  // the recorder's operation id, for messages (0: none)
	Group string // the register group (its keys are checked together)
	Read  int    // a Get of this key; -1 for a Txn
	ID    uint64
	Cmps  []TxnCmp
	Then  []int // keys put if every compare holds
	Els   []int // keys put otherwise
}

type TxnOut struct {
	Unknown   bool // no answer: it may or may not have applied
	Succeeded bool
	Compares  []bool
	Writer    uint64 // a read: the txn whose value it saw (0: absent)
	Version   uint64 // a read: the version it saw
}

// TxnCell is one key in the model: the transaction that last wrote it and
// its version. No transaction deletes, so writer 0 means never written.
type TxnCell struct{ Writer, Version uint64 }

type TxnState [TxnKeys]TxnCell

// TxnValue is the value transaction id writes.
func TxnValue(id uint64) []byte { return []byte("t" + strconv.FormatUint(id, 10)) }

// ParseWriter is the transaction that wrote v.
func ParseWriter(v []byte) (uint64, error) {
	id, err := strconv.ParseUint(strings.TrimPrefix(string(v), "t"), 10, 64)
	if err != nil || !strings.HasPrefix(string(v), "t") {
		return 0, fmt.Errorf("value %q is not a txn id", v)
	}
	return id, nil
}

// TxnModel checks a history; index gives each transaction's log index
// (from its answer, or from a read of its value, or a made-up one that no
// compare can name if nobody saw it).
func TxnModel(index func(id uint64) uint64) porcupine.NondeterministicModel {
	apply := func(s TxnState, in TxnIn) (TxnState, bool, []bool) {
		held := make([]bool, len(in.Cmps))
		ok := true
		for i, c := range in.Cmps {
			held[i] = s[c.Key].Version == c.Version
			ok = ok && held[i]
		}
		keys := in.Els
		if ok {
			keys = in.Then
		}
		for _, k := range keys {
			s[k] = TxnCell{Writer: in.ID, Version: index(in.ID)}
		}
		return s, ok, held
	}
	return porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			for _, op := range h {
				g := op.Input.(TxnIn).Group
				by[g] = append(by[g], op)
			}
			groups := make([]string, 0, len(by))
			for g := range by {
				groups = append(groups, g)
			}
			sort.Strings(groups)
			out := make([][]porcupine.Operation, 0, len(groups))
			for _, g := range groups {
				out = append(out, by[g])
			}
			return out
		},
		Init: func() []any { return []any{TxnState{}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(TxnState), input.(TxnIn), output.(TxnOut)
			if in.Read >= 0 {
				if c := s[in.Read]; c.Writer == out.Writer && c.Version == out.Version {
					return []any{s}
				}
				return nil
			}
			next, ok, held := apply(s, in)
			if out.Unknown {
				return []any{s, next}
			}
			if ok != out.Succeeded || !slices.Equal(held, out.Compares) {
				return nil
			}
			return []any{next}
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(TxnIn), output.(TxnOut)
			if in.Read >= 0 {
				return fmt.Sprintf("op %d: get(%sk%d) -> t%d@%d", in.Op, in.Group, in.Read, out.Writer, out.Version)
			}
			res := fmt.Sprintf("succeeded=%v %v", out.Succeeded, out.Compares)
			if out.Unknown {
				res = "unknown"
			}
			return fmt.Sprintf("op %d: txn t%d on %s if %v then %v else %v -> %s", in.Op, in.ID, in.Group, in.Cmps, in.Then, in.Els, res)
		},
		DescribeState: func(state any) string { return fmt.Sprint(state.(TxnState)) },
	}
}

// TxnHistory is what the clients of a transaction workload saw. Its
// methods are safe for concurrent use.
type TxnHistory struct {
	mu      sync.Mutex
	nextID  uint64
	ops     []porcupine.Operation
	index   map[uint64]uint64 // txn -> log index, from its answer or a read
	branch  map[uint64]bool   // txn -> then ran (answered txns only)
	ins     map[uint64]TxnIn
	unknown int
	bad     []Violation
}

func NewTxnHistory() *TxnHistory {
	return &TxnHistory{index: map[uint64]uint64{}, branch: map[uint64]bool{}, ins: map[uint64]TxnIn{}}
}

// NextID numbers a new transaction (from 1).
func (h *TxnHistory) NextID() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID++
	return h.nextID
}

// Begin notes a transaction about to be sent.
func (h *TxnHistory) Begin(in TxnIn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ins[in.ID] = in
}

// Learn notes that transaction id applied at index (how: "answer" or
// "read"); two different indexes for one transaction are a violation.
func (h *TxnHistory) Learn(id, index uint64, how string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.index[id]; ok && old != index {
		h.bad = append(h.bad, violation(CheckLinearizable, nil, "t%d seen at index %d and at %d (%s)", id, old, index, how))
	}
	h.index[id] = index
}

// Answered notes the branch an answered transaction ran.
func (h *TxnHistory) Answered(id uint64, then bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.branch[id] = then
}

// Bad notes something a client saw that no model allows (a value that
// names no transaction, a refusal).
func (h *TxnHistory) Bad(check string, op int64, format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bad = append(h.bad, violation(check, ops(op), format, args...))
}

// Record adds one operation, called and returned at call and ret
// (nanoseconds on the recorder's clock).
func (h *TxnHistory) Record(client int, in TxnIn, out TxnOut, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	if out.Unknown {
		o.Return = math.MaxInt64 // it may take effect at any later time
		h.unknown++
	}
	h.ops = append(h.ops, o)
}

// Counts are the number of operations and of those without an answer.
func (h *TxnHistory) Counts() (ops, unknown int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops), h.unknown
}

// In is the transaction id as sent, and whether it was; Branch the branch
// it ran, if answered.
func (h *TxnHistory) In(id uint64) (TxnIn, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	in, ok := h.ins[id]
	return in, ok
}

func (h *TxnHistory) Branch(id uint64) (then, answered bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	then, answered = h.branch[id]
	return then, answered
}

// boundLostAnswers ends each transaction whose answer was lost, but whose
// log index a read showed, at the first answer from an entry at or after
// that index: entries apply in order, each before its answers are sent,
// so it took effect by then. Left open to the end of the history, the few
// lost answers make porcupine's search heavy-tailed (1s to over 60s under
// -race on a loaded machine); bounded, it is not. Indexes are cluster
// wide, so this holds across groups.
func (h *TxnHistory) boundLostAnswers() []Violation {
	type seen struct {
		index uint64
		ret   int64
	}
	var after []seen // answers that show the entry at index was applied
	for _, o := range h.ops {
		in, out := o.Input.(TxnIn), o.Output.(TxnOut)
		switch {
		case out.Unknown:
		case in.Read >= 0 && out.Writer != 0:
			after = append(after, seen{out.Version, o.Return})
		case in.Read < 0:
			after = append(after, seen{h.index[in.ID], o.Return})
		}
	}
	sort.Slice(after, func(i, j int) bool { return after[i].index < after[j].index })
	// minRet[i]: the earliest answer among after[i:].
	minRet := make([]int64, len(after)+1)
	minRet[len(after)] = math.MaxInt64
	for i := len(after) - 1; i >= 0; i-- {
		minRet[i] = min(minRet[i+1], after[i].ret)
	}
	var out []Violation
	for i := range h.ops {
		o := &h.ops[i]
		in, res := o.Input.(TxnIn), o.Output.(TxnOut)
		ix, known := h.index[in.ID]
		if !res.Unknown || in.Read >= 0 || !known {
			continue
		}
		j := sort.Search(len(after), func(i int) bool { return after[i].index >= ix })
		o.Return = min(o.Return, minRet[j])
		if o.Return <= o.Call {
			out = append(out, violation(CheckLinearizable, ops(in.Op),
				"t%d (lost answer) applied at index %d, shown before it was called", in.ID, ix))
			o.Return = math.MaxInt64
		}
	}
	return out
}

// Check checks the history against the register model for up to timeout
// (see Linearizable for htmlPath), after the violations clients saw.
func (h *TxnHistory) Check(timeout time.Duration, htmlPath string) (porcupine.CheckResult, []Violation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]Violation(nil), h.bad...)
	out = append(out, h.boundLostAnswers()...)
	fake := uint64(1) << 62 // an index no client ever saw, so no compare names it
	index := func(id uint64) uint64 {
		if ix, ok := h.index[id]; ok {
			return ix
		}
		return fake + id
	}
	model := TxnModel(index)
	res, vs := Linearizable("transactions", model.ToModel(), h.ops, timeout, htmlPath)
	return res, append(out, vs...)
}
