package torture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/internal/history"
)

// check drains the queue and reads every acknowledged write back (with w,
// a worker's client, so those operations are in the history too), then
// runs every checker over the history and makes the report.
func (r *run) check(ctx context.Context, w *worker) *Report {
	r.logf("checking: draining the queue, reading back acknowledged writes")
	drained := r.queue != "" && r.drain(ctx, w)
	lost := r.readBack(ctx, w)

	rec := r.rec.records()
	var vs []history.Violation
	vs = append(vs, lost...)
	vs = append(vs, history.StaleWrites(rec.grants, rec.writes)...)
	for _, prim := range []string{primLease, primElection, primGroup, primIdem} {
		vs = append(vs, history.Exclusion(rec.holds[prim])...)
	}
	if r.queue != "" {
		vs = append(vs, history.QueueOrder(rec.qSends, rec.qDelivered, rec.qAcks, drained)...)
	}
	vs = append(vs, history.IdemOnce(rec.completes, rec.answers)...)
	r.logf("checking: porcupine on the KV/Txn history")
	path := filepath.Join(os.TempDir(), fmt.Sprintf("leasehold-torture-kv-%d.html", time.Now().UnixNano()))
	lin, kv := r.rec.txn.Check(2*time.Minute, path)
	vs = append(vs, kv...)

	rep := r.report(vs)
	rep.Linearizability = map[porcupine.CheckResult]string{porcupine.Ok: "ok", porcupine.Illegal: "illegal", porcupine.Unknown: "unknown (timed out)"}[lin]
	rep.QueueDrained = drained
	return rep
}

// drain receives and acks until the queue has been empty for longer than
// a delivery's visibility (so every delivery left unacked came back), for
// up to a minute. It reports whether the queue ended empty.
func (r *run) drain(ctx context.Context, w *worker) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	lastGot := time.Now()
	for ctx.Err() == nil && time.Since(lastGot) < queueVisibility+time.Second {
		if w.receive(ctx, 500*time.Millisecond, true) > 0 {
			lastGot = time.Now()
		}
	}
	info, err := r.admin.Queue(ctx, r.queue, 0)
	if err != nil {
		r.logf("drain: %v", err)
		return false
	}
	if info.Depth > 0 {
		r.logf("drain: %d messages still in the queue after a minute", info.Depth)
	}
	return info.Depth == 0
}

// readBack reads every acknowledged fenced write; one that is gone or
// holds other bytes is lost. (The KV/Txn keys are checked by porcupine,
// whose model refuses a read that misses an acknowledged write.)
func (r *run) readBack(ctx context.Context, w *worker) []history.Violation {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	writes := r.rec.records().writes
	var (
		mu  sync.Mutex
		out []history.Violation
		wg  sync.WaitGroup
	)
	jobs := make(chan history.Write)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wr := range jobs {
				var v []byte
				op, err := w.call(primLease, "read_back", wr.Key, nil, func() (map[string]any, error) {
					_, err := retry(ctx, func() error {
						c, cancel := opCtx(ctx)
						defer cancel()
						var err error
						v, _, err = w.c.GetKey(c, wr.Key)
						return err
					})
					return map[string]any{"value": string(v)}, err
				})
				var bad string
				switch {
				case errors.Is(err, leasehold.ErrNotFound):
					bad = "is gone"
				case err != nil:
					bad = "could not be read: " + err.Error()
				case !bytes.Equal(v, wr.Value):
					bad = fmt.Sprintf("reads back %q", v)
				default:
					continue
				}
				mu.Lock()
				out = append(out, history.Violation{Check: history.CheckLost, Ops: []int64{wr.Op, op.ID},
					Msg: fmt.Sprintf("%s, acknowledged at version %d, %s", wr.Key, wr.Version, bad)})
				mu.Unlock()
			}
		}()
	}
	for _, wr := range writes {
		jobs <- wr
	}
	close(jobs)
	wg.Wait()
	return out
}
