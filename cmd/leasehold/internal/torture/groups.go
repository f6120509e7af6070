package torture

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/groups"
	"github.com/leasehold/leasehold/internal/history"
)

// opOwn is the record of a partition's ownership: from its function's
// start to its end.
const opOwn = "own"

// member is one member of the run's partition group: it runs groups.Run
// for a while, leaves, and joins again, so partitions keep moving. Each
// partition it owns is a hold (its epoch the token), and its work is
// fenced writes with the epoch: Exclusion finds two owners at once, and
// StaleWrites a write accepted with an epoch already superseded.
func (w *worker) member(ctx context.Context) {
	group := w.run.group
	name := fmt.Sprintf("m%d", w.id)
	for ctx.Err() == nil {
		stint, cancel := context.WithTimeout(ctx, time.Duration(3000+w.rng.IntN(6000))*time.Millisecond)
		err := groups.Run(stint, w.c, group, name, func(pctx context.Context, partition int, epoch uint64) error {
			w.own(pctx, group, name, partition, epoch)
			return nil
		}, groups.TTL(leaseTTL), groups.Logger(slog.New(slog.DiscardHandler)))
		cancel()
		if err != nil {
			w.rec.add(Op{Worker: w.id, Prim: primGroup, Op: "run", Key: group, Invoke: w.rec.now(), Return: w.rec.now(),
				Result: classify(err), Err: err.Error()})
			sleep(ctx, time.Second)
		}
	}
}

// own works on partition until its context ends, and records the hold.
// A member's partitions run at once: own uses nothing of w's but its
// client and the recorder (both safe for concurrent use).
func (w *worker) own(ctx context.Context, group, member string, partition int, epoch uint64) {
	res := fmt.Sprintf("%s#%d", group, partition)
	start := w.rec.now()
	w.rec.grant(history.Grant{Resource: res, Token: epoch, At: start})
	for n := 0; sleep(ctx, time.Duration(100+rand.IntN(300))*time.Millisecond); n++ {
		key := w.run.name("partitioned/p%d/%s-e%d-%d", partition, member, epoch, n)
		value := []byte(fmt.Sprintf("by %s with epoch %d", member, epoch))
		var version uint64
		op, err := w.call(primGroup, "put_fenced", key, map[string]any{"partition": partition, "epoch": epoch}, func() (map[string]any, error) {
			c, cancel := opCtx(ctx)
			defer cancel()
			var err error
			version, err = w.c.Put(c, key, value, client.FencedByPartition(group, partition, epoch))
			return map[string]any{"version": version}, err
		})
		if err == nil {
			w.rec.wrote(history.Write{Op: op.ID, Key: key, Value: value, Version: version, Resource: res, Token: epoch, Sent: op.Invoke})
		}
	}
	end := w.rec.now()
	if d := groups.SessionDeadline(ctx); !d.IsZero() {
		end = min(end, w.rec.at(d))
	}
	op := w.rec.add(Op{Worker: w.id, Prim: primGroup, Op: opOwn, Key: res, Invoke: start, Return: end, Result: resultOK,
		In: map[string]any{"member": member, "epoch": epoch}})
	w.rec.hold(primGroup, history.Hold{Op: op, Owner: member, Resource: res, Token: epoch, Sent: start, Ack: start, End: end})
}
