package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// Transactions on overlapping keys, checked against history's model of a
// multi-key register with compare-and-set (history.TxnModel): a value read
// identifies its write, and the version a read shows gives the index of a
// transaction whose answer was lost in the leader kill.

func txnKey(k int) string { return "txn/k" + strconv.Itoa(k) }

// txnRun is the history of a run and its count of answered transactions.
type txnRun struct {
	*history.TxnHistory
	base time.Time
	done atomic.Int64
}

func (h *txnRun) record(client int, in history.TxnIn, out history.TxnOut, call, ret time.Time) {
	h.Record(client, in, out, call.Sub(h.base).Nanoseconds(), ret.Sub(h.base).Nanoseconds())
}

// runTxnClient makes transactions and reads until stop closes.
func runTxnClient(id int, cl *client.Client, h *txnRun, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(id), 14))
	known := [history.TxnKeys]uint64{} // the versions this client last saw
	reread := -1
	// Every other client gives up soon, so that some transactions in
	// flight at the leader kill end without an answer (their outcome is
	// then the model's to choose).
	opTimeout := 8 * time.Second
	if id%2 == 0 {
		opTimeout = 300 * time.Millisecond
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		if k := reread; k >= 0 || rng.IntN(10) < 3 {
			if k < 0 {
				k = rng.IntN(history.TxnKeys)
			}
			reread = -1
			call := time.Now()
			info, err := cl.GetKeyInfo(ctx, txnKey(k))
			ret := time.Now()
			cancel()
			var out history.TxnOut
			switch {
			case errors.Is(err, leasehold.ErrNotFound):
			case err != nil:
				continue // a read that failed did nothing
			default:
				if out.Writer, err = history.ParseWriter(info.Value); err != nil {
					h.Bad(history.CheckBadRecord, 0, "%v", err)
					continue
				}
				out.Version = info.Version
				known[k] = info.Version
				h.Learn(out.Writer, info.Version, "read")
			}
			h.record(id, history.TxnIn{Read: k}, out, call, ret)
			continue
		}
		in := history.TxnIn{Read: -1, ID: h.NextID()}
		keys := rng.Perm(history.TxnKeys)
		n := 1 + rng.IntN(3)
		t := cl.Txn(ctx)
		value := history.TxnValue(in.ID)
		for _, k := range keys[:n] {
			in.Cmps = append(in.Cmps, history.TxnCmp{Key: k, Version: known[k]})
			in.Then = append(in.Then, k)
			t.If(client.VersionEquals(txnKey(k), known[k])).Then(client.OpPut(txnKey(k), value))
		}
		if n < history.TxnKeys && rng.IntN(2) == 0 {
			in.Els = []int{keys[n]}
			t.Else(client.OpPut(txnKey(keys[n]), value))
		}
		h.Begin(in)
		call := time.Now()
		res, err := t.Commit()
		ret := time.Now()
		cancel()
		var out history.TxnOut
		if err != nil {
			switch leasehold.CodeOf(err) {
			case leasehold.CodeUnavailable, leasehold.CodeUnknown, leasehold.CodeCanceled, leasehold.CodeWaitTimeout:
				// no answer in time: it may or may not have applied
			default:
				h.Bad(history.CheckBadRecord, 0, "t%d refused: %v", in.ID, err)
			}
			out.Unknown = true
			reread = in.Cmps[0].Key
		} else {
			out = history.TxnOut{Succeeded: res.Succeeded, Compares: res.Compares}
			h.Learn(in.ID, res.Index, "answer")
			h.Answered(in.ID, res.Succeeded)
			if res.Succeeded {
				for _, k := range in.Then {
					known[k] = res.Index
				}
			} else {
				for i, ok := range res.Compares {
					if !ok {
						reread = in.Cmps[i].Key
					}
				}
			}
		}
		h.record(id, in, out, call, ret)
		h.done.Add(1)
	}
}

// TestTxnLinearizableAcrossLeaderKill runs 8 clients making transactions on
// 4 overlapping keys through a 3-node cluster whose leader is killed (and
// later restarted) mid-load. The history must be linearizable against the
// multi-key register model, and the replicas' final state must hold every
// transaction whole: a key showing transaction T's write means every other
// key T's branch wrote shows T's write or a later one.
func TestTxnLinearizableAcrossLeaderKill(t *testing.T) {
	const clients = 8
	c := testcluster.Start(t, 3)
	h := &txnRun{TxnHistory: history.NewTxnHistory(), base: time.Now()}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		cl := newTestClient(t, time.Second, c.URLs()...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			runTxnClient(i, cl, h, stop)
		}()
	}
	stopped := false
	stopClients := func() {
		if stopped {
			return
		}
		stopped = true
		close(stop)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("clients did not stop within 30s")
		}
	}
	defer stopClients()
	until := func(n int64, what string) {
		waitFor(t, 60*time.Second, what, func() (bool, string) {
			d := h.done.Load()
			return d >= n, fmt.Sprintf("%d of %d transactions answered", d, n)
		})
	}

	until(150, "load before the kill")
	old := c.WaitLeader(10 * time.Second)
	c.Kill(old)
	next := c.WaitNewLeader(old, 15*time.Second)
	until(h.done.Load()+150, "load after the kill")
	c.Restart(old)
	until(h.done.Load()+150, "load after the restart")
	stopClients()

	// The replicas agree; read the final state through the API.
	waitSameState(t, c, 20*time.Second)
	cl := newTestClient(t, time.Second, c.URLs()...)
	var final history.TxnState
	for k := range history.TxnKeys {
		info, err := cl.GetKeyInfo(ctxFor(t, 10*time.Second), txnKey(k))
		if errors.Is(err, leasehold.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("read %s: %v", txnKey(k), err)
		}
		id, err := history.ParseWriter(info.Value)
		if err != nil {
			t.Fatal(err)
		}
		final[k] = history.TxnCell{Writer: id, Version: info.Version}
	}

	// All or nothing: the branch of each txn seen in the final state, by
	// its answer or, for a lost answer, by the key it was seen on.
	branch := func(writer uint64, seenOn int) []int {
		in, _ := h.In(writer)
		if then, answered := h.Branch(writer); (answered && !then) || (!answered && !slices.Contains(in.Then, seenOn)) {
			return in.Els
		}
		return in.Then
	}
	for k, cell := range final {
		if cell.Writer == 0 {
			continue
		}
		wrote := branch(cell.Writer, k)
		if !slices.Contains(wrote, k) {
			t.Errorf("k%d holds t%d, whose branch %v did not write it", k, cell.Writer, wrote)
		}
		for _, o := range wrote {
			f := final[o]
			// Transactions committed in one log entry share its index: o
			// may hold a later one of the entry at the same version. That
			// is a tear only if that one wrote k too (k would then hold it).
			tie := f.Version == cell.Version && f.Writer != cell.Writer && slices.Contains(branch(f.Writer, o), k)
			if f.Version < cell.Version || tie {
				t.Errorf("torn transaction t%d: k%d holds its write at %d but k%d holds t%d at %d", cell.Writer, k, cell.Version, o, f.Writer, f.Version)
			}
		}
	}

	checking := time.Now()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("leasehold-txn-history-%d.html", time.Now().UnixNano()))
	res, vs := h.Check(60*time.Second, path)
	ops, unknown := h.Counts()
	t.Logf("killed %s, then %s led; %d operations (%d transactions, %d with a lost answer); final state %v; porcupine: %v in %v",
		c.ID(old), c.ID(next), ops, h.done.Load(), unknown, final, res, time.Since(checking).Round(time.Millisecond))
	for _, v := range vs {
		t.Error(v)
	}
	if res == porcupine.Unknown {
		t.Fatal("porcupine timed out before deciding")
	}
}
