package queue

import (
	"context"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// acker group-commits the acks of one Consume: while one ack call is on
// its way, the acks of handlers that finish meanwhile gather, and go
// together in one AckBatch (one log entry) when it returns. A lone ack
// goes at once as a plain Ack, so batching never delays an ack: it only
// merges the ones that would otherwise wait in line for the leader.
type acker struct {
	c    *client.Client
	reqs chan ackReq
	stop chan struct{} // closed when Consume is done: acks go one by one
	done chan struct{} // closed when the loop has returned
}

type ackReq struct {
	ctx  context.Context
	d    leasehold.Delivery
	errc chan error
}

func newAcker(c *client.Client) *acker {
	a := &acker{c: c, reqs: make(chan ackReq), stop: make(chan struct{}), done: make(chan struct{})}
	go a.loop()
	return a
}

// ack acks d, in a batch with others if some are waiting, and returns
// its own answer.
func (a *acker) ack(ctx context.Context, d leasehold.Delivery) error {
	r := ackReq{ctx: ctx, d: d, errc: make(chan error, 1)}
	select {
	case a.reqs <- r:
		return <-r.errc
	case <-a.stop: // a handler that outlived Consume's drain
		return a.c.Ack(ctx, d)
	}
}

// close stops the loop once the acks it holds are answered.
func (a *acker) close() {
	close(a.stop)
	<-a.done
}

func (a *acker) loop() {
	defer close(a.done)
	for {
		var first ackReq
		select {
		case first = <-a.reqs:
		case <-a.stop:
			return
		}
		batch := []ackReq{first}
	gather:
		for len(batch) < leasehold.MaxQueueBatch {
			select {
			case r := <-a.reqs:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		a.send(batch)
	}
}

// send acks a batch: one Ack for one, else one AckBatch under the first's
// context (every settle has the same timeout), each answered on its own.
func (a *acker) send(batch []ackReq) {
	if len(batch) == 1 {
		batch[0].errc <- a.c.Ack(batch[0].ctx, batch[0].d)
		return
	}
	ds := make([]leasehold.Delivery, len(batch))
	for i, r := range batch {
		ds[i] = r.d
	}
	errs, err := a.c.AckBatch(batch[0].ctx, ds)
	for i, r := range batch {
		if err != nil {
			r.errc <- err
			continue
		}
		r.errc <- errs[i]
	}
}
