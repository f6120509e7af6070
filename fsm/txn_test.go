package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/api/leasehold"
)

func put(key, val string) TxnOp { return TxnOp{Key: key, Value: []byte(val)} }
func del(key string) TxnOp      { return TxnOp{Key: key, Delete: true} }

func value(s *State, key string) string {
	it, ok := s.Get(key)
	if !ok {
		return "<absent>"
	}
	return string(it.Value)
}

func TestTxnChoosesBranchAndAppliesItWhole(t *testing.T) {
	h := newHarness(t)
	wantCode(t, "seed", h.one(&Put{Key: "a", Value: []byte("1")}), leasehold.CodeUnknown)
	va := h.ix
	then := []TxnOp{put("a", "2"), put("b", "new"), del("gone")}
	els := []TxnOp{put("c", "else")}

	r := h.one(&Txn{Compares: []Compare{{Key: "a", Op: CompareVersionEqual, Version: va},
		{Key: "a", Op: CompareValueEqual, Value: []byte("1")}, {Key: "b", Op: CompareAbsent}}, Then: then, Else: els})
	wantCode(t, "txn", r, leasehold.CodeUnknown)
	if r.Txn() == nil || !r.Txn().Succeeded || !slices.Equal(r.Txn().Compares, []bool{true, true, true}) ||
		!slices.Equal(r.Txn().Versions, []uint64{h.ix, h.ix, 0}) {
		t.Fatalf("txn result %+v, want then branch at version %d", r.Txn(), h.ix)
	}
	if value(h.s, "a") != "2" || value(h.s, "b") != "new" || value(h.s, "c") != "<absent>" {
		t.Fatalf("after then branch: a=%s b=%s c=%s", value(h.s, "a"), value(h.s, "b"), value(h.s, "c"))
	}

	// One compare fails: only the else branch runs.
	r = h.one(&Txn{Compares: []Compare{{Key: "a", Op: CompareVersionGreater, Version: 0}, {Key: "b", Op: CompareVersionLess, Version: 1}},
		Then: []TxnOp{del("a")}, Else: els})
	if r.Err != nil || r.Txn().Succeeded || !slices.Equal(r.Txn().Compares, []bool{true, false}) || !slices.Equal(r.Txn().Versions, []uint64{h.ix}) {
		t.Fatalf("txn result %+v (%v), want else branch", r.Txn(), r.Err)
	}
	if value(h.s, "a") != "2" || value(h.s, "c") != "else" {
		t.Fatalf("after else branch: a=%s c=%s", value(h.s, "a"), value(h.s, "c"))
	}
}

// Every refusal leaves the key-value space as it was and names the problem.
func TestTxnRefusals(t *testing.T) {
	h := newHarnessCfg(t, Config{DedupWindow: DefaultConfig().DedupWindow, DedupMax: 100,
		MaxTxnCompares: 2, MaxTxnOps: 2, MaxTxnBytes: 10})
	l := h.mustGrant(acq("g", "r"))
	wantCode(t, "seed", h.one(&Put{Key: "a", Value: []byte("1")}), leasehold.CodeUnknown)
	ok := []TxnOp{put("a", "x")}
	cases := []struct {
		name string
		c    *Txn
		code leasehold.Code
		msg  string
	}{
		{"no ops", &Txn{}, leasehold.CodeInvalid, "no operations"},
		{"too many compares", &Txn{Compares: []Compare{{Key: "a", Op: CompareExists}, {Key: "a", Op: CompareExists}, {Key: "a", Op: CompareExists}}, Then: ok},
			leasehold.CodeLimit, "max_txn_compares"},
		{"too many ops", &Txn{Else: []TxnOp{put("a", ""), put("b", ""), put("c", "")}}, leasehold.CodeLimit, "max_txn_ops"},
		{"too many bytes", &Txn{Then: []TxnOp{put("a", "123456")}, Else: []TxnOp{put("b", "123456")}}, leasehold.CodeLimit, "max_txn_bytes"},
		{"unknown operator", &Txn{Compares: []Compare{{Key: "a", Op: 99}}, Then: ok}, leasehold.CodeInvalid, "unknown operator"},
		{"value on a version compare", &Txn{Compares: []Compare{{Key: "a", Op: CompareExists, Value: []byte("1")}}, Then: ok},
			leasehold.CodeInvalid, "takes no value"},
		{"empty compare key", &Txn{Compares: []Compare{{Op: CompareExists}}, Then: ok}, leasehold.CodeInvalid, "compare key"},
		{"empty op key", &Txn{Then: []TxnOp{put("", "v")}}, leasehold.CodeInvalid, "key"},
		{"key twice in a branch", &Txn{Then: []TxnOp{put("a", "1"), del("a")}}, leasehold.CodeInvalid, "written twice in the then branch"},
		{"delete with a value", &Txn{Else: []TxnOp{{Key: "a", Delete: true, Value: []byte("v")}}}, leasehold.CodeInvalid, "carries a value"},
		{"stale fence", &Txn{Fence: &leasehold.Fence{Resource: "r", Token: l.Token + 1}, Then: ok}, leasehold.CodeStaleToken, "stale"},
	}
	for _, tc := range cases {
		r := h.one(tc.c)
		wantCode(t, tc.name, r, tc.code)
		if !strings.Contains(r.Err.Error(), tc.msg) {
			t.Errorf("%s: message %q does not say %q", tc.name, r.Err, tc.msg)
		}
		if r.Txn() != nil || value(h.s, "a") != "1" || value(h.s, "b") != "<absent>" {
			t.Fatalf("%s: refused txn changed something: result %+v, a=%s b=%s", tc.name, r.Txn(), value(h.s, "a"), value(h.s, "b"))
		}
	}
	big := &Txn{Then: []TxnOp{{Key: "a", Value: make([]byte, leasehold.MaxValueBytes+1)}}}
	h.s.cfg.MaxTxnBytes = 0
	wantCode(t, "value over the per-value limit", h.one(big), leasehold.CodeInvalid)
	r := h.one(&Txn{Fence: &leasehold.Fence{Resource: "r", Token: l.Token}, Then: ok})
	if r.Err != nil || !r.Txn().Succeeded || value(h.s, "a") != "x" {
		t.Fatalf("the holder's fenced txn: %+v %v", r.Txn(), r.Err)
	}
}

// A retry gets the first answer, even after a snapshot; a request ID
// reused for another transaction is refused.
func TestTxnDedup(t *testing.T) {
	h := newHarness(t)
	c := &Txn{RequestID: "t", Caller: "svc", Compares: []Compare{{Key: "k", Op: CompareAbsent}}, Then: []TxnOp{put("k", "1")}}
	first := h.one(c)
	if first.Err != nil || !first.Txn().Succeeded {
		t.Fatalf("first: %+v %v", first.Txn(), first.Err)
	}
	restored, err := Restore(h.s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*State{"live": h.s, "restored": restored} {
		again := s.Apply(h.ix+1, &Batch{Time: h.now, Cmds: []Command{c}})[0]
		if !again.Dup || again.Err != nil || !again.Txn().Succeeded || !slices.Equal(again.Txn().Versions, first.Txn().Versions) {
			t.Fatalf("%s: retry got %+v %v, want the first answer %+v", name, again.Txn(), again.Err, first.Txn())
		}
		if it, _ := s.Get("k"); it.Version != first.Version() {
			t.Fatalf("%s: the retry wrote again: version %d, want %d", name, it.Version, first.Version())
		}
	}
	other := *c
	other.Then = []TxnOp{put("k", "2")}
	wantCode(t, "reused id", h.one(&other), leasehold.CodeInvalid)
}

// Txn against a model: a map of key to value and version. Each txn either
// is refused and changes nothing, or runs exactly the branch the model's
// compares choose, every write at the entry's index.
func TestTxnAllOrNothingModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type item struct {
			val string
			ver uint64
		}
		cfg := DefaultConfig()
		cfg.MaxTxnOps = 3
		s := New(cfg, nil)
		model := map[string]item{}
		keys := []string{"a", "b", "c", ""} // "" is refused
		vals := []string{"", "x", "y"}
		ops := rapid.Custom(func(t *rapid.T) []TxnOp {
			n := rapid.IntRange(0, 4).Draw(t, "n")
			out := make([]TxnOp, n)
			for i := range out {
				out[i] = TxnOp{Key: rapid.SampledFrom(keys).Draw(t, "key"), Delete: rapid.Bool().Draw(t, "delete")}
				if !out[i].Delete {
					out[i].Value = []byte(rapid.SampledFrom(vals).Draw(t, "val"))
				}
			}
			return out
		})
		for ix := uint64(1); ix <= 40; ix++ {
			var c Txn
			for range rapid.IntRange(0, 3).Draw(t, "compares") {
				cmp := Compare{Key: rapid.SampledFrom(keys[:3]).Draw(t, "ckey"), Op: CompareOp(rapid.IntRange(1, 6).Draw(t, "op")),
					Version: rapid.Uint64Range(0, ix).Draw(t, "ver")}
				if cmp.Op == CompareValueEqual {
					cmp.Value = []byte(rapid.SampledFrom(vals).Draw(t, "cval"))
				}
				c.Compares = append(c.Compares, cmp)
			}
			c.Then, c.Else = ops.Draw(t, "then"), ops.Draw(t, "else")
			before := fmt.Sprint(model)
			r := s.Apply(ix, &Batch{Time: int64(ix), Cmds: []Command{&c}})[0]

			valid := len(c.Then)+len(c.Else) > 0 && len(c.Then) <= 3 && len(c.Else) <= 3
			for _, branch := range [][]TxnOp{c.Then, c.Else} {
				seen := map[string]bool{}
				for _, op := range branch {
					valid = valid && op.Key != "" && !seen[op.Key]
					seen[op.Key] = true
				}
			}
			if !valid {
				if r.Err == nil {
					t.Fatalf("entry %d: invalid txn %+v accepted", ix, c)
				}
			} else {
				if r.Err != nil {
					t.Fatalf("entry %d: valid txn refused: %v", ix, r.Err)
				}
				want := true
				for _, cmp := range c.Compares {
					it, ok := model[cmp.Key]
					switch cmp.Op {
					case CompareVersionEqual:
						want = want && it.ver == cmp.Version
					case CompareVersionGreater:
						want = want && it.ver > cmp.Version
					case CompareVersionLess:
						want = want && it.ver < cmp.Version
					case CompareValueEqual:
						want = want && ok && it.val == string(cmp.Value)
					case CompareExists:
						want = want && ok
					case CompareAbsent:
						want = want && !ok
					}
				}
				if r.Txn().Succeeded != want {
					t.Fatalf("entry %d: branch then=%v, model says %v", ix, r.Txn().Succeeded, want)
				}
				branch := c.Else
				if want {
					branch = c.Then
				}
				for _, op := range branch {
					if op.Delete {
						delete(model, op.Key)
					} else {
						model[op.Key] = item{string(op.Value), ix}
					}
				}
			}
			if !valid && fmt.Sprint(model) != before {
				t.Fatalf("entry %d: model changed by a refused txn", ix)
			}
			size := 0
			for _, k := range keys {
				it, ok := s.Get(k)
				m, mok := model[k]
				if ok != mok || ok && (!bytes.Equal(it.Value, []byte(m.val)) || it.Version != m.ver) {
					t.Fatalf("entry %d: key %q is %+v (%v), model %+v (%v)", ix, k, it, ok, m, mok)
				}
				if ok {
					size += len(k) + len(it.Value)
				}
			}
			if s.kv.bytes != size {
				t.Fatalf("entry %d: kvBytes %d, the keys hold %d", ix, s.kv.bytes, size)
			}
		}
	})
}
