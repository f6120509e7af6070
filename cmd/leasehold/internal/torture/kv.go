package torture

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/history"
)

// kvTask reads a key of a register group, or writes some of its keys
// with a transaction of version compares (or a plain put), every value
// naming its transaction; porcupine checks the groups' history against
// history.TxnModel.
func (w *worker) kvTask(ctx context.Context) {
	g := w.rng.IntN(kvGroups)
	group := fmt.Sprintf("g%d/", g)
	key := func(k int) string { return w.run.name("kv/%sk%d", group, k) }
	known := &w.known[g]
	if k := w.reread[g]; k >= 0 || w.rng.IntN(10) < 3 {
		if k < 0 {
			k = w.rng.IntN(history.TxnKeys)
		}
		w.reread[g] = -1
		var info client.KeyInfo
		op, err := w.call(primKV, "get", key(k), nil, func() (map[string]any, error) {
			c, cancel := opCtx(ctx)
			defer cancel()
			var err error
			info, err = w.c.GetKeyInfo(c, key(k))
			if err != nil {
				return nil, err
			}
			return map[string]any{"value": string(info.Value), "version": info.Version}, nil
		})
		var out history.TxnOut
		switch {
		case errors.Is(err, leasehold.ErrNotFound):
		case err != nil:
			return // a read that failed did nothing
		default:
			if out.Writer, err = history.ParseWriter(info.Value); err != nil {
				w.rec.txn.Bad(history.CheckBadRecord, op.ID, "%s: %v", key(k), err)
				return
			}
			out.Version = info.Version
			known[k] = info.Version
			w.rec.txn.Learn(out.Writer, info.Version, "read")
		}
		w.rec.txn.Record(w.id, history.TxnIn{Op: op.ID, Group: group, Read: k}, out, op.Invoke, op.Return)
		return
	}
	in := history.TxnIn{Group: group, Read: -1, ID: w.rec.txn.NextID()}
	value := history.TxnValue(in.ID)
	keys := w.rng.Perm(history.TxnKeys)
	n := 1 + w.rng.IntN(3)
	plain := w.rng.IntN(8) == 0 // a put without compares
	var txnKeys []string
	for _, k := range keys[:n] {
		if !plain {
			in.Cmps = append(in.Cmps, history.TxnCmp{Key: k, Version: known[k]})
		}
		in.Then = append(in.Then, k)
		txnKeys = append(txnKeys, key(k))
	}
	if !plain && n < history.TxnKeys && w.rng.IntN(2) == 0 {
		in.Els = []int{keys[n]}
	}
	w.rec.txn.Begin(in)
	var res *client.TxnResult
	op, err := w.call(primKV, "txn", group, map[string]any{"txn": in.ID, "cmps": in.Cmps, "then": in.Then, "else": in.Els},
		func() (map[string]any, error) {
			c, cancel := opCtx(ctx)
			defer cancel()
			t := w.c.Txn(c)
			for i, k := range in.Then {
				if !plain {
					t.If(client.VersionEquals(txnKeys[i], in.Cmps[i].Version))
				}
				t.Then(client.OpPut(key(k), value))
			}
			for _, k := range in.Els {
				t.Else(client.OpPut(key(k), value))
			}
			var err error
			res, err = t.Commit()
			if err != nil {
				return nil, err
			}
			return map[string]any{"succeeded": res.Succeeded, "compares": res.Compares, "index": res.Index}, nil
		})
	in.Op = op.ID
	var out history.TxnOut
	switch op.Result {
	case resultOK:
		out = history.TxnOut{Succeeded: res.Succeeded, Compares: res.Compares}
		if out.Compares == nil {
			out.Compares = []bool{}
		}
		w.rec.txn.Learn(in.ID, res.Index, "answer")
		w.rec.txn.Answered(in.ID, res.Succeeded)
		if res.Succeeded {
			for _, k := range in.Then {
				known[k] = res.Index
			}
		} else {
			for i, ok := range res.Compares {
				if !ok {
					w.reread[g] = in.Cmps[i].Key
				}
			}
		}
	case resultUnknown:
		out.Unknown = true
		w.reread[g] = in.Then[0]
	default:
		if errors.Is(err, leasehold.ErrLimit) {
			return // refused for backpressure: nothing applied, nothing to check
		}
		// A well-formed transaction refused otherwise is an answer the
		// model does not know.
		w.rec.txn.Bad(history.CheckBadRecord, op.ID, "txn t%d refused: %v", in.ID, err)
		out.Unknown = true
	}
	w.rec.txn.Record(w.id, in, out, op.Invoke, op.Return)
}
