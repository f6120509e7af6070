package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/fsm"
)

// proposals is the group commit: commands proposed while earlier entries
// await commit are merged into one log entry, so concurrent requests share
// one commit and one fsync. The caller that finds a free slot submits the
// entry and waits for it itself; handing each proposal to a batching
// goroutine and back costs two goroutine wake-ups, which on an idle
// machine are a good part of a commit.
type proposals struct {
	mu       sync.Mutex
	queue    []*proposal
	eager    int // queued proposals that must not wait for company (not behind)
	inflight int // entries submitted and not yet applied (≤ MaxInflight)

	// submit keeps entries in the order their proposals were queued, so
	// the leader's time stamps never go backwards in the log.
	submit sync.Mutex
}

type proposal struct {
	cmds  []fsm.Command
	res   []fsm.Result
	err   error
	index uint64 // of the log entry that carried it, once applied
	done  chan struct{}
	// behind: it rides in the next entry another proposal starts (until
	// its linger runs out). taken: it is in an entry. Both guarded by mu.
	behind, taken bool
}

// Propose commits cmd and returns its result. It blocks until the entry is
// applied, ctx ends or the node stops. When ctx ends first the outcome is
// unknown: retry with the same request ID to learn it.
func (n *Node) Propose(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	res, err := n.ProposeAll(ctx, []fsm.Command{cmd})
	if err != nil {
		return fsm.Result{}, err
	}
	return res[0], nil
}

// ProposeAll commits cmds in one log entry (with whatever else is waiting)
// and returns their results in order, as Propose does for one command.
func (n *Node) ProposeAll(ctx context.Context, cmds []fsm.Command) ([]fsm.Result, error) {
	if !n.timers.isActive() {
		// Not taken over yet: the token counter may still have to be
		// raised to the floor (see raiseTokens) before any grant.
		return nil, n.notLeader()
	}
	return n.propose(ctx, cmds, false)
}

// ProposeBehind commits cmds as ProposeAll does, but rather than start
// an entry of their own they ride in the next one another proposal
// starts, or start one after Config.QueueLinger. It is for acquires that
// will wait in line anyway: in a contended hand-off, the releaser's next
// acquire then shares the entry of the next holder's release instead of
// taking an fsync of its own ahead of it, so each hand-off costs one
// commit.
func (n *Node) ProposeBehind(ctx context.Context, cmds []fsm.Command) ([]fsm.Result, error) {
	if !n.timers.isActive() {
		return nil, n.notLeader()
	}
	return n.propose(ctx, cmds, n.cfg.QueueLinger > 0)
}

func (n *Node) propose(ctx context.Context, cmds []fsm.Command, behind bool) ([]fsm.Result, error) {
	if len(cmds) == 0 {
		return nil, nil
	}
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	select {
	case <-n.stop:
		return nil, errStopped
	default:
	}
	var span trace.Span // nil: not traced
	if tp := n.cfg.TracerProvider; tp != nil {
		ctx, span = tp.Tracer(tracerName).Start(ctx, "raft commit",
			trace.WithAttributes(attribute.Int("leasehold.commands", len(cmds))))
		defer span.End()
	}
	p := &proposal{cmds: cmds, done: make(chan struct{}), behind: behind}
	q := &n.props
	q.mu.Lock()
	q.queue = append(q.queue, p)
	lead := false
	if !behind {
		q.eager++
		lead = q.takeSlot(n.cfg.MaxInflight)
	}
	q.mu.Unlock()
	if lead {
		n.commit()
	}
	if behind {
		// Not stopped when the caller leaves: the proposal stays queued
		// and must still go out.
		time.AfterFunc(n.cfg.QueueLinger, func() { n.lingerOver(p) })
	}
	select {
	case <-p.done:
		switch {
		case span == nil:
		case p.err == nil:
			span.SetAttributes(attribute.Int64("leasehold.raft_index", int64(p.index)))
		default:
			span.SetStatus(codes.Error, p.err.Error())
		}
		return p.res, p.err
	case <-ctx.Done():
		if span != nil {
			span.SetStatus(codes.Error, ctx.Err().Error())
		}
		return nil, ctx.Err()
	}
}

// tracerName names the spans of the raft commit.
const tracerName = "github.com/leasehold/leasehold/cluster"

func (q *proposals) takeSlot(max int) bool {
	if q.inflight < max {
		q.inflight++
		return true
	}
	return false
}

// lingerOver commits p, still queued after its linger, like any other
// proposal: in an entry of its own if a slot is free, or in the entry the
// next finishing commit starts.
func (n *Node) lingerOver(p *proposal) {
	q := &n.props
	q.mu.Lock()
	lead := false
	if !p.taken {
		p.behind = false
		q.eager++
		lead = q.takeSlot(n.cfg.MaxInflight)
	}
	q.mu.Unlock()
	if lead {
		n.commit()
	}
}

// commit holds one inflight slot: it submits the queued proposals as one
// entry, waits for it and hands out the results. If more proposals queued
// meanwhile, a new goroutine takes the slot on, so the caller's own answer
// is not held up by the next entry.
func (n *Node) commit() {
	batch, f, start := n.submitNext()
	if batch == nil {
		return
	}
	err := n.await(f)
	took := time.Since(start)
	q := &n.props
	q.mu.Lock()
	more := q.eager > 0 // proposals behind wait for company or their linger
	if !more {
		q.inflight--
	}
	q.mu.Unlock()
	if more {
		go n.commit()
	}
	if n.cfg.CommitLatency != nil {
		// Metrics: from handing the entry to raft until it was committed
		// and applied here (or failed).
		n.cfg.CommitLatency(took)
	}
	var results []fsm.Result
	var index uint64
	if err == nil {
		index = f.Index()
		results, _ = f.Response().([]fsm.Result)
		if e, ok := f.Response().(error); ok {
			err = e // applied, but its answers must not go out
		} else if want := countCmds(batch); len(results) != want {
			err = fmt.Errorf("cluster: %d results for %d commands", len(results), want)
		}
	}
	if err != nil {
		err = n.applyError(err)
	}
	for _, p := range batch {
		if err != nil {
			p.err = err
		} else {
			p.res, results = results[:len(p.cmds):len(p.cmds)], results[len(p.cmds):]
			p.index = index
		}
		close(p.done)
	}
}

// submitNext takes queued proposals, up to MaxBatch commands (a larger
// proposal goes alone), and hands them to raft as one entry. With nothing
// queued it gives up the slot and returns nil.
func (n *Node) submitNext() ([]*proposal, raft.ApplyFuture, time.Time) {
	q := &n.props
	q.submit.Lock()
	defer q.submit.Unlock()
	q.mu.Lock()
	if len(q.queue) == 0 {
		q.inflight--
		q.mu.Unlock()
		return nil, nil, time.Time{}
	}
	k, size := 0, 0
	for k < len(q.queue) && (k == 0 || size+len(q.queue[k].cmds) <= n.cfg.MaxBatch) {
		size += len(q.queue[k].cmds)
		k++
	}
	batch := q.queue[:k:k]
	for _, p := range batch {
		p.taken = true
		if !p.behind {
			q.eager--
		}
	}
	q.queue = q.queue[k:]
	if len(q.queue) == 0 {
		q.queue = nil // let the backing array go
	}
	q.mu.Unlock()
	b := fsm.Batch{Time: n.cfg.Clock.Now().UnixNano(), Cmds: make([]fsm.Command, 0, size)}
	for _, p := range batch {
		b.Cmds = append(b.Cmds, p.cmds...)
	}
	start := time.Now()
	return batch, n.raft.Apply(b.Encode(nil), n.cfg.ApplyTimeout), start
}

func countCmds(batch []*proposal) int {
	n := 0
	for _, p := range batch {
		n += len(p.cmds)
	}
	return n
}
