package torture

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/history"
)

// electionTask campaigns in one of a few elections, leads briefly and
// resigns. Exclusion checks one leader per term (each term's token issued
// once), terms that follow real time, and leaders whose safe windows
// never overlap.
func (w *worker) electionTask(ctx context.Context) {
	name := w.run.name("election/e%d", w.rng.IntN(elections))
	var l *client.Leadership
	op, err := w.call(primElection, "campaign", name, nil, func() (map[string]any, error) {
		c, cancel := opCtx(ctx)
		defer cancel()
		var err error
		l, err = w.c.Campaign(c, name, fmt.Sprintf("w%d", w.id), client.TTL(leaseTTL), client.Wait(time.Second))
		if err != nil {
			return nil, err
		}
		return map[string]any{"term": l.Token()}, nil
	})
	if err != nil {
		return
	}
	h := history.Hold{Op: op.ID, Owner: fmt.Sprintf("w%d", w.id), Resource: name, Token: l.Token(), Lease: l.Lease().ID(),
		Sent: op.Invoke, Ack: op.Return}
	sleep(ctx, time.Duration(100+w.rng.IntN(500))*time.Millisecond)
	h.End = min(w.rec.now(), w.rec.at(l.Deadline()))
	res, _ := w.call(primElection, "resign", name, map[string]any{"term": l.Token()}, func() (map[string]any, error) {
		c, cancel := opCtx(ctx)
		defer cancel()
		return nil, l.Resign(c)
	})
	h.EndOp = res.ID
	h.Released, h.ReleaseUnknown = res.Result == resultOK, res.Result == resultUnknown
	w.rec.hold(primElection, h)
}
