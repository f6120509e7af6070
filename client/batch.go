package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// batchInflight is how many Batch requests a client keeps open at once.
// Calls made while they are out wait and go together in the next one.
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
	// left is set when the caller stopped waiting (its context ended), so
	// whatever the operation got is cleaned up by the client instead.
	left atomic.Bool
}

// do sends op, with whatever else is waiting, and returns its result.
func (co *coalescer) do(ctx context.Context, op *pb.BatchOp) (*pb.BatchResult, error) {
	bc := &batchCall{op: op, ctx: ctx, done: make(chan struct{})}
	co.mu.Lock()
	co.queue = append(co.queue, bc)
	lead := co.inflight < batchInflight
	if lead {
		co.inflight++
	}
	co.mu.Unlock()
	if lead {
		// Sent from a goroutine of its own, so that the caller can leave
		// when its context ends while the others wait for their answers.
		go co.send()
	}
	select {
	case <-bc.done:
		return bc.res, bc.err
	case <-ctx.Done():
		if bc.left.CompareAndSwap(false, true) {
			if last := co.lastErr.Load(); last != nil {
				return nil, fmt.Errorf("%w (last error: %w)", ctx.Err(), last)
			}
			return nil, ctx.Err()
		}
		<-bc.done // answered just now: the caller gets it after all
		return bc.res, bc.err
	}
}

// send holds one of the inflight slots: it sends the waiting calls as one
// request and hands out the answers. If more calls queued meanwhile, a new
// goroutine carries the slot on, so this caller's answer is not held up.
func (co *coalescer) send() {
	co.mu.Lock()
	if len(co.queue) == 0 {
		co.inflight--
		co.mu.Unlock()
		return
	}
	k := min(len(co.queue), co.max)
	batch := co.queue[:k:k]
	co.queue = co.queue[k:]
	if len(co.queue) == 0 {
		co.queue = nil
	}
	co.mu.Unlock()

	results, err := co.post(batch)

	co.mu.Lock()
	more := len(co.queue) > 0
	if !more {
		co.inflight--
	}
	co.mu.Unlock()
	if more {
		go co.send()
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
		if !bc.left.CompareAndSwap(false, true) {
			co.c.cleanUp(bc)
		}
		close(bc.done)
	}
}

// post sends one Batch request, retried (same request IDs) across nodes
// while unavailable. Once every caller in it has left, the attempt in
// flight still gets RequestTimeout to bring back the answers (so what they
// got can be given back), but no retry starts after that.
func (co *coalescer) post(batch []*batchCall) ([]*pb.BatchResult, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waiting atomic.Int32
	waiting.Store(int32(len(batch)))
	req := &pb.BatchRequest{Ops: make([]*pb.BatchOp, len(batch))}
	for i, bc := range batch {
		req.Ops[i] = bc.op
		stop := context.AfterFunc(bc.ctx, func() {
			if waiting.Add(-1) == 0 {
				time.AfterFunc(co.c.cfg.RequestTimeout, cancel)
			}
		})
		defer stop()
	}
	try := func(s leaseholdv1connect.LeasesClient, ctx context.Context, r *connect.Request[pb.BatchRequest]) (*connect.Response[pb.BatchResponse], error) {
		resp, err := s.Batch(ctx, r)
		if err != nil && ctx.Err() == nil {
			co.lastErr.Store(&leasehold.Error{Code: leasehold.CodeUnavailable, Message: err.Error()})
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

// cleanUp gives back what an operation got after its caller left: a grant
// is released, and a place in line is taken up and dropped, so neither
// blocks others until its TTL or wait bound.
func (c *Client) cleanUp(bc *batchCall) {
	if acq := bc.op.GetAcquire(); acq != nil && bc.res != nil {
		c.giveBack(acq, bc.res)
	}
}

// giveBack releases the grant, or withdraws the place in line, that acq
// got (res) after its caller left.
func (c *Client) giveBack(acq *pb.AcquireRequest, res *pb.BatchResult) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RequestTimeout)
		defer cancel()
		lease := res.GetAcquire().GetLease()
		if res.GetQueued() {
			// Waiting for the place and leaving again withdraws it (the
			// server gives a caller that went away a short grace first).
			wctx, wcancel := context.WithTimeout(ctx, time.Second)
			resp, err := call(wctx, c, 0, leasesOf, leaseholdv1connect.LeasesClient.Acquire, acq)
			wcancel()
			if err != nil {
				return
			}
			lease = resp.GetLease()
		}
		if lease != nil {
			c.ReleaseByID(ctx, lease.GetId(), acq.Secret)
		}
	}()
}

// acquireCall sends an AcquireRequest. With batching, an acquire that must
// wait is first queued by the batch and then waited for by sending the same
// request to Acquire, which picks up that place in line.
func (c *Client) acquireCall(ctx context.Context, perTry time.Duration, req *pb.AcquireRequest) (*pb.AcquireResponse, error) {
	if c.batch == nil {
		return call(ctx, c, perTry, leasesOf, leaseholdv1connect.LeasesClient.Acquire, req)
	}
	res, err := c.batch.do(ctx, &pb.BatchOp{Op: &pb.BatchOp_Acquire{Acquire: req}})
	if err != nil || !res.GetQueued() {
		return res.GetAcquire(), err
	}
	resp, err := call(ctx, c, perTry, leasesOf, leaseholdv1connect.LeasesClient.Acquire, req)
	if err != nil && ctx.Err() != nil {
		// The caller left, maybe before the Acquire went out: make sure
		// the place is given up.
		c.giveBack(req, res)
	}
	return resp, err
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
