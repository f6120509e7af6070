package history

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestTxnModelCatchesViolations feeds the model made-up histories that
// break it, so a passing linearizability check means something: a torn
// transaction, a compare that answered against the state, a lost write;
// and ones that are fine.
func TestTxnModelCatchesViolations(t *testing.T) {
	index := map[uint64]uint64{1: 10, 2: 11}
	model := TxnModel(func(id uint64) uint64 { return index[id] })
	m := model.ToModel()
	t1 := TxnIn{Read: -1, ID: 1, Cmps: []TxnCmp{{0, 0}, {1, 0}}, Then: []int{0, 1}}
	t2 := TxnIn{Read: -1, ID: 2, Cmps: []TxnCmp{{0, 0}}, Then: []int{0}, Els: []int{2}}
	ok := TxnOut{Succeeded: true, Compares: []bool{true, true}}
	op := func(client int, in TxnIn, out TxnOut, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	read := func(k int) TxnIn { return TxnIn{Read: k} }
	other := func(in TxnIn) TxnIn { in.Group = "other/"; return in }
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want bool // linearizable
	}{
		{"whole", []porcupine.Operation{
			op(0, t1, ok, 0, 10),
			op(1, read(0), TxnOut{Writer: 1, Version: 10}, 20, 30),
			op(1, read(1), TxnOut{Writer: 1, Version: 10}, 40, 50),
			op(2, t2, TxnOut{Compares: []bool{false}}, 60, 70),
			op(1, read(2), TxnOut{Writer: 2, Version: 11}, 80, 90),
		}, true},
		{"a lost answer that applied", []porcupine.Operation{
			op(0, t1, TxnOut{Unknown: true}, 0, math.MaxInt64),
			op(1, read(1), TxnOut{Writer: 1, Version: 10}, 40, 50),
		}, true},
		{"groups apart", []porcupine.Operation{
			op(0, t1, ok, 0, 10),
			op(1, other(read(0)), TxnOut{}, 20, 30),
		}, true},
		{"torn: one key written, the other not", []porcupine.Operation{
			op(0, t1, ok, 0, 10),
			op(1, read(0), TxnOut{Writer: 1, Version: 10}, 20, 30),
			op(1, read(1), TxnOut{}, 40, 50),
		}, false},
		{"torn lost answer", []porcupine.Operation{
			op(0, t1, TxnOut{Unknown: true}, 0, math.MaxInt64),
			op(1, read(0), TxnOut{Writer: 1, Version: 10}, 20, 30),
			op(1, read(1), TxnOut{}, 40, 50),
		}, false},
		{"then ran though a compare failed", []porcupine.Operation{
			op(0, t1, ok, 0, 10),
			op(2, t2, TxnOut{Succeeded: true, Compares: []bool{true}}, 20, 30),
		}, false},
		{"an acknowledged write lost", []porcupine.Operation{
			op(0, t1, ok, 0, 10),
			op(1, read(0), TxnOut{}, 20, 30),
		}, false},
	}
	for _, tc := range cases {
		if got := porcupine.CheckOperations(m, tc.ops); got != tc.want {
			t.Errorf("%s: linearizable=%v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTxnHistoryCheckCatchesLostWrite runs the whole Check (lost answers
// bounded, porcupine) on a history that loses an acknowledged write.
func TestTxnHistoryCheckCatchesLostWrite(t *testing.T) {
	h := NewTxnHistory()
	id := h.NextID()
	in := TxnIn{Op: 1, Read: -1, ID: id, Then: []int{0}}
	h.Begin(in)
	h.Learn(id, 7, "answer")
	h.Record(0, in, TxnOut{Succeeded: true, Compares: []bool{}}, 0, 10)
	h.Record(1, TxnIn{Op: 2, Read: 0}, TxnOut{}, 20, 30) // the write is gone
	res, vs := h.Check(10*1e9, "")
	if res != porcupine.Illegal || len(vs) != 1 || vs[0].Check != CheckLinearizable {
		t.Fatalf("Check = %v, %v; want illegal with one violation", res, vs)
	}
}
