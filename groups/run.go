// Package groups runs a function for each partition of a leasehold
// partition group that this member owns, and stops it before another
// member may own the partition.
//
//	err := groups.Run(ctx, c, "orders", "worker-1", func(ctx context.Context, partition int, epoch uint64) error {
//		// work on partition until ctx ends; pass epoch to pgfence with each write
//	})
//
// A partition's function runs under a context that is canceled when the
// partition is revoked (Run acknowledges the revocation once the function
// returned, and only then may the partition move), when the session is at
// risk (no renewal has moved its local safe deadline, and StopMargin is
// left), or when ctx ends. The epoch is the grant's fencing token: a
// resource guarded by it refuses a member that lost the partition, even
// one that was paused past its deadline.
package groups

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// Func works on one partition until ctx ends. Returning an error while
// the partition is still owned starts it again after a backoff; returning
// nil leaves the partition idle until it is revoked or the session ends.
type Func func(ctx context.Context, partition int, epoch uint64) error

// ErrSessionAtRisk is the cause of a partition context canceled because
// the session's local safe deadline came near without a renewal.
var ErrSessionAtRisk = errors.New("groups: session at risk: no renewal before its local safe deadline")

// ErrRevoked is the cause of a partition context canceled because the
// partition was revoked (it goes to another member once fn returned).
var ErrRevoked = errors.New("groups: partition revoked")

type sessionKey struct{}

// SessionDeadline is the local safe deadline of the session a partition's
// function runs under (see client.Lease.Deadline): the partition is
// certainly this member's until then. It moves on with each renewal. It
// is the zero time outside a function that Run started.
func SessionDeadline(ctx context.Context) time.Time {
	if m, ok := ctx.Value(sessionKey{}).(*client.Membership); ok {
		return m.Deadline()
	}
	return time.Time{}
}

// Run joins group as member and runs fn for each partition assigned to
// the member, until ctx ends; then it stops every function, leaves the
// group and returns nil. A lost session is joined again (while an old
// session of the same member still lives, the join is retried until it
// lapses). Run returns an error only for what retrying cannot mend: no
// such group, a refused member name, no permission.
func Run(ctx context.Context, c *client.Client, group, member string, fn Func, opts ...Option) error {
	cfg := configOf(opts)
	backoff := cfg.minBackoff
	for ctx.Err() == nil {
		m, err := c.Join(ctx, group, member, client.TTL(cfg.ttl), client.Metadata(cfg.metadata))
		switch {
		case err == nil:
			backoff = cfg.minBackoff
			s := &session{cfg: cfg, m: m, fn: fn, parts: map[int]*part{}, finished: make(chan *part)}
			s.run(ctx)
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, leasehold.ErrHeld), errors.Is(err, leasehold.ErrUnavailable), errors.Is(err, leasehold.ErrLimit):
			cfg.log.Warn("join failed; retrying", "group", group, "member", member, "err", err)
		default:
			return fmt.Errorf("join %s as %s: %w", group, member, err)
		}
		if !sleep(ctx, backoff) {
			break
		}
		backoff = min(2*backoff, cfg.maxBackoff)
	}
	return nil
}

// sleep waits d, or reports false if ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// session is one membership: the partitions it runs, by number.
type session struct {
	cfg      config
	m        *client.Membership
	fn       Func
	parts    map[int]*part
	finished chan *part
	acks     sync.WaitGroup // acknowledgements under way
}

// run follows the member's assignments until the session ends, is at
// risk, or ctx ends; then it stops every partition and leaves.
func (s *session) run(ctx context.Context) {
	log := s.cfg.log.With("group", s.m.Group(), "member", s.m.Member(), "lease", s.m.Lease().ID())
	log.Info("joined")
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopWatch := s.watchDeadline(sctx, cancel)
	defer stopWatch()
	stream := s.m.Assignments(sctx)
	updates := stream.Updates()
	for updates != nil {
		select {
		case u, ok := <-updates:
			if !ok {
				updates = nil
				if err := stream.Err(); err != nil && sctx.Err() == nil {
					log.Warn("assignment stream ended", "err", err)
				}
				break
			}
			s.apply(sctx, u, log)
			if u.Ended {
				log.Warn("session ended on the server")
				cancel(fmt.Errorf("groups: session of %s ended", s.m.Member()))
			}
		case p := <-s.finished:
			s.done(sctx, p, log)
		}
	}
	// The session is over or about to be: stop everything, then leave, so
	// the partitions move at once if the server still counts us.
	cancel(context.Cause(sctx))
	for len(s.parts) > 0 {
		s.done(sctx, <-s.finished, log)
	}
	s.acks.Wait()
	lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer lcancel()
	if err := s.m.Leave(lctx); err != nil && !errors.Is(err, client.ErrLeaseLost) {
		log.Warn("leave failed; the session lapses instead", "err", err)
	}
	log.Info("left", "why", context.Cause(sctx))
}

// watchDeadline cancels the session StopMargin before its local safe
// deadline unless a renewal moved it on, and as soon as the session ends.
func (s *session) watchDeadline(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			t := time.NewTimer(time.Until(s.m.Deadline().Add(-s.cfg.stopMargin)))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-s.m.Done():
				t.Stop()
				cancel(fmt.Errorf("%w: %w", ErrSessionAtRisk, s.m.Err()))
				return
			case <-t.C:
				if time.Until(s.m.Deadline()) > s.cfg.stopMargin {
					continue // renewed meanwhile
				}
				cancel(ErrSessionAtRisk)
				return
			}
		}
	}()
	return func() { <-done }
}

// apply brings the running partitions in line with an update.
func (s *session) apply(ctx context.Context, u client.AssignmentUpdate, log *slog.Logger) {
	if u.Initial {
		listed := map[int]bool{}
		for _, a := range u.Changes {
			listed[a.Partition] = true
		}
		for n, p := range s.parts {
			if !listed[n] {
				p.stop(nil, false) // no longer ours: nothing to acknowledge
			}
		}
	}
	for _, a := range u.Changes {
		switch a.State {
		case client.Added:
			s.start(ctx, a.Partition, a.Epoch, log)
		case client.Revoking:
			p, ok := s.parts[a.Partition]
			switch {
			case ok && p.epoch == a.Epoch:
				p.stop(ErrRevoked, true)
			case ok:
				// An older grant's function still stops here, and this one
				// waited for it: never started, acknowledged once it is gone.
				if p.next == a.Epoch {
					p.next = 0
				}
				p.ackAfter = append(p.ackAfter, a.Epoch)
			default:
				// Nothing runs on the partition here: nothing to wait for.
				s.acks.Go(func() { s.ack(ctx, a.Partition, a.Epoch, log) })
			}
		case client.Removed:
			if p, ok := s.parts[a.Partition]; ok {
				p.stop(nil, false)
				p.next = 0
			}
		}
	}
}

// start runs fn on partition n with epoch, once an older grant's function
// there has returned.
func (s *session) start(ctx context.Context, n int, epoch uint64, log *slog.Logger) {
	if p, ok := s.parts[n]; ok {
		if p.epoch != epoch {
			p.stop(nil, false)
			p.next = epoch
		}
		return
	}
	pctx, cancel := context.WithCancelCause(context.WithValue(ctx, sessionKey{}, s.m))
	p := &part{n: n, epoch: epoch, ctx: pctx, cancel: cancel}
	s.parts[n] = p
	log.Info("partition started", "partition", n, "epoch", epoch)
	go func() {
		p.work(s.fn, s.cfg, log)
		s.finished <- p
	}()
}

// done handles a partition whose function has returned for good: it
// acknowledges a revocation, and starts a newer grant that waited.
func (s *session) done(ctx context.Context, p *part, log *slog.Logger) {
	delete(s.parts, p.n)
	log.Info("partition stopped", "partition", p.n, "epoch", p.epoch, "why", context.Cause(p.ctx))
	if p.ackDue {
		s.acks.Go(func() { s.ack(ctx, p.n, p.epoch, log) })
	}
	for _, epoch := range p.ackAfter {
		s.acks.Go(func() { s.ack(ctx, p.n, epoch, log) })
	}
	if p.next != 0 && ctx.Err() == nil {
		s.start(ctx, p.n, p.next, log)
	}
}

// ack acknowledges a revocation, retrying while the session lasts.
func (s *session) ack(ctx context.Context, n int, epoch uint64, log *slog.Logger) {
	backoff := 50 * time.Millisecond
	for {
		err := s.m.AckRevocation(ctx, n, epoch)
		if err == nil || ctx.Err() != nil {
			return
		}
		if !errors.Is(err, leasehold.ErrUnavailable) {
			// Stale or unknown: the grant is gone already.
			log.Warn("revocation not acknowledged", "partition", n, "epoch", epoch, "err", err)
			return
		}
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, time.Second)
	}
}

// part is one partition's function under one grant.
type part struct {
	n      int
	epoch  uint64
	ctx    context.Context
	cancel context.CancelCauseFunc
	// Owned by the session's goroutine.
	ackDue   bool     // revoked: acknowledge once fn returned
	next     uint64   // a newer grant to start once fn returned
	ackAfter []uint64 // newer grants revoked before they started: acknowledge once fn returned
}

// stop cancels the function; ack says a revocation awaits its return.
func (p *part) stop(cause error, ack bool) {
	p.ackDue = p.ackDue || ack
	p.cancel(cause)
}

// work runs fn until its context ends, starting it again after an error.
func (p *part) work(fn Func, cfg config, log *slog.Logger) {
	backoff := cfg.minBackoff
	for {
		err := fn(p.ctx, p.n, p.epoch)
		if p.ctx.Err() != nil {
			return
		}
		if err == nil {
			<-p.ctx.Done() // idle until revoked
			return
		}
		log.Warn("partition function failed; starting it again", "partition", p.n, "epoch", p.epoch, "err", err, "in", backoff)
		if !sleep(p.ctx, backoff) {
			return
		}
		backoff = min(2*backoff, cfg.maxBackoff)
	}
}
