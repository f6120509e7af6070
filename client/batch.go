package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
)

// batchInflight is how many Batch requests a client keeps open at once.
// Calls made while they are out wait and go together in the next one.
// Four, not two: the node holds a batch of acquires that will wait in line
// for up to its queue linger (2 ms), to ride in the entry of the release
// they wait on, and with two slots the goroutine holding the lock would
// have its release stuck behind two such batches.
const batchInflight = 4

// coalescer sends the acquires, renewals and releases that a client's
// goroutines make at the same moment in one Leases.Batch request: one
// round trip and, on the server, one log entry and one fsync for all of
// them. A call made while the line is idle goes out at once, alone.
type coalescer struct {
	c        *Client
	max      int // operations per request
	mu       sync.Mutex
	queue    []*batchCall
	inflight int
	// lastErr is the last failure of a request that is being retried,
	// cleared by a success: a caller that leaves says what it waited on.
	lastErr atomic.Pointer[leasehold.Error]
}

// batchCall is one operation waiting for its answer.
type batchCall struct {
	op   *pb.BatchOp
	ctx  context.Context
	res  *pb.BatchResult
	err  error
	done chan struct{}
}

// do sends op, with whatever else is waiting, and returns its result.
func (co *coalescer) do(ctx context.Context, op *pb.BatchOp) (*pb.BatchResult, error) {
	ctx, stop := co.c.bound(ctx, 0)
	defer stop()
	if s := co.c.session; s != nil {
		// On the session stream, if one is open or can be.
		if res, err := s.do(ctx, op); !errors.Is(err, errNoSession) {
			return res, err
		}
	}
	bc := &batchCall{op: op, ctx: ctx, done: make(chan struct{})}
	co.mu.Lock()
	co.queue = append(co.queue, bc)
	lead := co.inflight < batchInflight
	if lead {
		co.inflight++
	}
	co.mu.Unlock()
	if lead {
		switch batch := co.take(); {
		case len(batch) == 1 && batch[0] == bc:
			// Alone: sent from the caller's goroutine under its context,
			// which saves a goroutine hand-off each way.
			results, err := co.post(ctx, batch)
			co.deliver(batch, results, err)
		case batch != nil:
			// Others' calls too: sent from a goroutine of its own, so that
			// the caller can leave when its context ends.
			go co.send(batch)
		}
	}
	select {
	case <-bc.done:
		return bc.res, bc.err
	case <-ctx.Done():
		// What the call gets is the caller's to give back (see giveBack).
		if last := co.lastErr.Load(); last != nil {
			return nil, co.c.ended(ctx, last)
		}
		return nil, co.c.ended(ctx, nil)
	}
}

// take takes the waiting calls (up to max) for the holder of an inflight
// slot to send. With nothing waiting it gives the slot up and returns nil.
func (co *coalescer) take() []*batchCall {
	co.mu.Lock()
	defer co.mu.Unlock()
	if len(co.queue) == 0 {
		co.inflight--
		return nil
	}
	k := min(len(co.queue), co.max)
	batch := co.queue[:k:k]
	co.queue = co.queue[k:]
	if len(co.queue) == 0 {
		co.queue = nil
	}
	return batch
}

// send posts batch, under a context that ends when all its callers have
// left (see post), and hands out the answers.
func (co *coalescer) send(batch []*batchCall) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waiting atomic.Int32
	waiting.Store(int32(len(batch)))
	for _, bc := range batch {
		stop := context.AfterFunc(bc.ctx, func() {
			if waiting.Add(-1) == 0 {
				// The attempt in flight still gets RequestTimeout to bring
				// the answers back (so what they got can be given back),
				// but no retry starts after that.
				time.AfterFunc(co.c.cfg.RequestTimeout, cancel)
			}
		})
		defer stop()
	}
	if tr := co.c.cfg.Tracing; tr != nil {
		callers := make([]context.Context, len(batch))
		for i, bc := range batch {
			callers[i] = bc.ctx
		}
		var end func()
		ctx, end = tr.SharedRequest(ctx, callers)
		defer end()
	}
	results, err := co.post(ctx, batch)
	co.deliver(batch, results, err)
}

// deliver hands out the answers to batch. The inflight slot is passed on
// first: if more calls queued meanwhile, a new goroutine sends them, so
// that these answers are not held up by the next request.
func (co *coalescer) deliver(batch []*batchCall, results []*pb.BatchResult, err error) {
	if next := co.take(); next != nil {
		go co.send(next)
	}
	for i, bc := range batch {
		if err != nil {
			bc.err = err
		} else {
			bc.res, bc.err = results[i], nil
			if r := results[i].GetError(); r != nil {
				bc.res, bc.err = nil, api.FromBatchError(r)
			}
		}
		close(bc.done)
	}
}

// post sends one Batch request, retried (same request IDs) across nodes
// while unavailable, until ctx ends.
func (co *coalescer) post(ctx context.Context, batch []*batchCall) ([]*pb.BatchResult, error) {
	req := &pb.BatchRequest{Ops: make([]*pb.BatchOp, len(batch))}
	for i, bc := range batch {
		req.Ops[i] = bc.op
	}
	try := func(s leaseholdv1connect.LeasesClient, ctx context.Context, r *connect.Request[pb.BatchRequest]) (*connect.Response[pb.BatchResponse], error) {
		resp, err := s.Batch(ctx, r)
		if e := new(leasehold.Error); err != nil && ctx.Err() == nil && errors.As(api.FromConnect(err), &e) && e.Code == leasehold.CodeUnavailable {
			co.lastErr.Store(e)
		}
		return resp, err
	}
	resp, err := call(ctx, co.c, co.c.cfg.RequestTimeout, leasesOf, try, req)
	if err != nil {
		return nil, err
	}
	co.lastErr.Store(nil)
	if len(resp.Results) != len(batch) {
		return nil, &leasehold.Error{Code: leasehold.CodeUnknown, Message: "the server answered a batch with the wrong number of results"}
	}
	return resp.Results, nil
}

// giveBack undoes what acq may have got after its caller left: it sends
// the same request again, which the server answers from its first answer
// (or waits for its place in line), and releases a grant it learns of. A
// place in line is withdrawn by leaving again: the server gives a caller
// that went away a short grace, then gives the place up. (If the first
// request never arrived, this one takes the lease and gives it back.)
func (c *Client) giveBack(acq *pb.AcquireRequest) {
	c.giveBackWith(acq.Secret, func(ctx context.Context) (*pb.Lease, error) {
		resp, err := call(ctx, c, 0, leasesOf, leaseholdv1connect.LeasesClient.Acquire, acq)
		return resp.GetLease(), err
	})
}

// giveBackWith is giveBack for a request that resend sends again.
func (c *Client) giveBackWith(secret string, resend func(context.Context) (*pb.Lease, error)) {
	if !c.startGiveBack() {
		return // closed: the grant, if any, expires
	}
	go func() {
		defer c.givingBack.Done()
		ctx, cancel := context.WithTimeout(c.bg, c.cfg.RequestTimeout)
		defer cancel()
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		l, err := resend(wctx)
		wcancel()
		if err == nil {
			c.releaseCall(ctx, &pb.ReleaseRequest{LeaseId: l.GetId(), Secret: secret, RequestId: randomHex(16)})
		}
	}()
}

// acquireCall sends an AcquireRequest. With batching, an acquire that must
// wait is first queued by the batch and then waited for by sending the same
// request to Acquire, which picks up that place in line.
func (c *Client) acquireCall(ctx context.Context, perTry time.Duration, req *pb.AcquireRequest) (*pb.AcquireResponse, error) {
	resp, err := c.sendAcquire(ctx, perTry, req)
	if err != nil && ctx.Err() != nil {
		c.giveBack(req)
	}
	return resp, err
}

func (c *Client) sendAcquire(ctx context.Context, perTry time.Duration, req *pb.AcquireRequest) (*pb.AcquireResponse, error) {
	if c.batch == nil {
		return call(ctx, c, perTry, leasesOf, leaseholdv1connect.LeasesClient.Acquire, req)
	}
	res, err := c.batch.do(ctx, &pb.BatchOp{Op: &pb.BatchOp_Acquire{Acquire: req}})
	if err != nil || !res.GetQueued() {
		return res.GetAcquire(), err
	}
	return call(ctx, c, perTry, leasesOf, leaseholdv1connect.LeasesClient.Acquire, req)
}

func (c *Client) renewCall(ctx context.Context, req *pb.RenewRequest) (*pb.RenewResponse, error) {
	if c.batch != nil {
		res, err := c.batch.do(ctx, &pb.BatchOp{Op: &pb.BatchOp_Renew{Renew: req}})
		return res.GetRenew(), err
	}
	return call(ctx, c, c.cfg.RequestTimeout, leasesOf, leaseholdv1connect.LeasesClient.Renew, req)
}

func (c *Client) releaseCall(ctx context.Context, req *pb.ReleaseRequest) (*pb.ReleaseResponse, error) {
	if c.batch != nil {
		res, err := c.batch.do(ctx, &pb.BatchOp{Op: &pb.BatchOp_Release{Release: req}})
		return res.GetRelease(), err
	}
	return call(ctx, c, c.cfg.RequestTimeout, leasesOf, leaseholdv1connect.LeasesClient.Release, req)
}
