package server

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/fsm"
)

// leases implements leaseholdv1connect.LeasesHandler.
type leases struct{ s *Server }

// cancelTimeout bounds the Cancel a server proposes when a waiting client
// goes away.
const cancelTimeout = 5 * time.Second

func (h leases) Acquire(ctx context.Context, req *connect.Request[pb.AcquireRequest]) (*connect.Response[pb.AcquireResponse], error) {
	s := h.s
	start := time.Now()
	cmd, secret, err := acquireCommand(req.Msg, caller(ctx))
	if err != nil {
		s.metrics.Acquisitions.WithLabelValues("invalid").Inc()
		return nil, api.ToConnect(err)
	}
	// A forwarded copy must carry the request ID and secret chosen here.
	req.Msg.RequestId, req.Msg.Secret = cmd.RequestID, secret
	res, err := s.acquire(ctx, cmd)
	if addr, ok := leaderFor(req, err); ok {
		return relay(s.fwd.at(addr).leases.Acquire(ctx, forwarded(s.fwd, req, req.Msg)))
	}
	out, err := s.acquireAnswer(secret, res, err, start)
	if err != nil {
		return nil, api.ToConnect(err)
	}
	return connect.NewResponse(out), nil
}

// acquireAnswer builds the reply to a granted acquire and counts the
// outcome; err (a failure of the whole call) or else res.Err is returned
// instead for one that failed. Acquire and Batch answer through it alike.
func (s *Server) acquireAnswer(secret string, res fsm.Result, err error, start time.Time) (*pb.AcquireResponse, error) {
	if err == nil {
		err = res.Err
	}
	if err != nil {
		s.metrics.Acquisitions.WithLabelValues(leasehold.CodeOf(err).String()).Inc()
		return nil, err
	}
	s.metrics.Acquisitions.WithLabelValues("granted").Inc()
	s.metrics.AcquireWait.Observe(time.Since(start).Seconds())
	if res.Dup {
		res.Remaining = s.remainingNow(res.Lease.ID, res.Remaining)
	}
	if res.ForeignSecret {
		secret = "" // a retry with another secret: only the first request's holder knows it
	}
	return &pb.AcquireResponse{
		Lease:     leasePB(res.Lease, res.Remaining),
		Secret:    secret,
		ExpiresIn: durPB(res.Remaining),
	}, nil
}

// acquire proposes cmd and, if it queues, waits for its outcome. A caller
// that goes away withdraws its place in the queue; a grant that raced the
// withdrawal is released by it.
func (s *Server) acquire(ctx context.Context, cmd *fsm.Acquire) (fsm.Result, error) {
	var outcome <-chan fsm.Result
	var res fsm.Result
	var err error
	queued := false
	if cmd.Wait > 0 {
		var stop func()
		key := cmd.Key()
		outcome, stop = s.node.Watch(key)
		defer stop()
		// A place in line a Batch took here, whose caller now waits for
		// it: wait for it as the attempt that took it, without another log
		// entry. Watching first means no grant is missed. (The key is
		// scoped to the caller and secret, so only the same caller finds
		// it; a place held by no Batch here is taken over by proposing
		// the acquire again, as a retry.)
		if attempt, _, ok := s.node.Queued(key); ok && s.places.claim(key) {
			cmd.Attempt, queued = attempt, true
			res = fsm.Result{Queued: true, Dup: true}
		}
	}
	if !queued {
		res, err = s.node.Propose(ctx, cmd)
	}
	if err != nil {
		if ctx.Err() != nil {
			// The caller left while the acquire was being committed: it may
			// have queued, or been granted, with nobody to take the answer.
			return res, s.leftEarly(ctx, cmd)
		}
		return res, err
	}
	if !res.Queued {
		if ctx.Err() != nil && res.Lease != nil {
			return fsm.Result{}, s.leftEarly(ctx, cmd) // granted as the caller left
		}
		return res, nil
	}
	foreign := res.ForeignSecret
	// The leader's timer ends the wait; the extra second only covers a
	// leader change, after which the new leader's timer takes over.
	fallback := time.NewTimer(cmd.Wait + time.Second)
	defer fallback.Stop()
	select {
	case r := <-outcome:
		if ctx.Err() != nil && r.Lease != nil {
			// Granted as the caller left: nobody will take this answer.
			return fsm.Result{}, s.leftEarly(ctx, cmd)
		}
		r.ForeignSecret = r.ForeignSecret || foreign
		return r, nil
	case <-ctx.Done():
		return fsm.Result{}, s.leftEarly(ctx, cmd)
	case <-fallback.C:
		go s.withdraw(0, cmd)
		return fsm.Result{}, leasehold.Errorf(leasehold.CodeWaitTimeout, "waited %v for %q without a grant", cmd.Wait, cmd.Resources)
	}
}

// withdrawGrace is how long a caller that went away has to come back
// (retrying the same request ID, say after a broken connection) before its
// place in line, or a grant nobody took, is given up.
const withdrawGrace = 2 * time.Second

// leftEarly answers for acquires whose caller's context ended first (one,
// or those of a batch). On shutdown the attempts stay, and the caller is
// told to retry elsewhere; otherwise they are withdrawn after the grace
// period, unless a retry takes them over first.
func (s *Server) leftEarly(ctx context.Context, cmds ...*fsm.Acquire) error {
	if s.base.Err() != nil {
		return leasehold.Errorf(leasehold.CodeUnavailable,
			"this node is shutting down; retry the acquire with the same request_id on another node")
	}
	if len(cmds) > 0 {
		go s.withdraw(withdrawGrace, cmds...)
	}
	return ctx.Err()
}

// withdraw cancels attempts of acquires after grace, in one log entry:
// their places in line, or the grants they got with nobody to take them.
// A retry's waiter or grant is never touched (each Cancel is scoped to its
// attempt).
func (s *Server) withdraw(grace time.Duration, cmds ...*fsm.Acquire) {
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.base.Done():
			return // shutting down: the leader's wait timer ends it
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	cancels := make([]fsm.Command, len(cmds))
	for i, c := range cmds {
		cancels[i] = &fsm.Cancel{Key: c.Key(), Attempt: c.Attempt}
	}
	results, err := s.node.ProposeAll(ctx, cancels)
	if err != nil {
		s.log.Warn("could not withdraw a waiting acquire; the leader's wait timer will end it", "count", len(cmds), "err", err)
		return
	}
	for i, res := range results {
		if res.Lease != nil {
			s.log.Info("released a grant whose caller went away", "lease", res.Lease.ID, "request_id", cmds[i].RequestID)
		}
	}
}

func (h leases) Renew(ctx context.Context, req *connect.Request[pb.RenewRequest]) (*connect.Response[pb.RenewResponse], error) {
	s := h.s
	cmd, err := renewCommand(req.Msg, caller(ctx))
	if err != nil {
		s.metrics.RenewalFailures.WithLabelValues(leasehold.CodeInvalid.String()).Inc()
		return nil, api.ToConnect(err)
	}
	cmd.Age = s.node.LeaseAge(cmd.LeaseID)
	req.Msg.RequestId = cmd.RequestID
	res, err := s.node.Propose(ctx, cmd)
	if addr, ok := leaderFor(req, err); ok {
		return relay(s.fwd.at(addr).leases.Renew(ctx, forwarded(s.fwd, req, req.Msg)))
	}
	out, err := s.renewAnswer(res, err)
	if err != nil {
		return nil, api.ToConnect(err)
	}
	return connect.NewResponse(out), nil
}

// renewAnswer is acquireAnswer for a renewal.
func (s *Server) renewAnswer(res fsm.Result, err error) (*pb.RenewResponse, error) {
	if err == nil {
		err = res.Err
	}
	if err != nil {
		s.metrics.RenewalFailures.WithLabelValues(leasehold.CodeOf(err).String()).Inc()
		return nil, err
	}
	if res.Dup {
		res.Remaining = s.remainingNow(res.Lease.ID, res.Remaining)
	}
	return &pb.RenewResponse{
		Lease:     leasePB(res.Lease, res.Remaining),
		ExpiresIn: durPB(res.Remaining),
	}, nil
}

func (h leases) Release(ctx context.Context, req *connect.Request[pb.ReleaseRequest]) (*connect.Response[pb.ReleaseResponse], error) {
	s := h.s
	cmd, err := releaseCommand(req.Msg, caller(ctx))
	if err != nil {
		return nil, api.ToConnect(err)
	}
	req.Msg.RequestId = cmd.RequestID
	res, err := s.node.Propose(ctx, cmd)
	if addr, ok := leaderFor(req, err); ok {
		return relay(s.fwd.at(addr).leases.Release(ctx, forwarded(s.fwd, req, req.Msg)))
	}
	out, err := s.releaseAnswer(cmd, res, err)
	if err != nil {
		return nil, api.ToConnect(err)
	}
	return connect.NewResponse(out), nil
}

// releaseAnswer is acquireAnswer for a release.
func (s *Server) releaseAnswer(cmd *fsm.Release, res fsm.Result, err error) (*pb.ReleaseResponse, error) {
	if err == nil {
		err = res.Err
	}
	if err != nil {
		if errors.Is(err, leasehold.ErrNotFound) {
			s.metrics.ReleasedAfterLoss.Inc()
			s.log.Warn("release found the lease gone: its holder worked past the lease", slog.Uint64("lease", cmd.LeaseID))
		}
		return nil, err
	}
	return &pb.ReleaseResponse{Lease: leasePB(res.Lease, -1)}, nil
}

func (h leases) Get(ctx context.Context, req *connect.Request[pb.GetRequest]) (*connect.Response[pb.GetResponse], error) {
	s := h.s
	r := req.Msg.Resource
	if err := leasehold.ValidateName("resource", r, leasehold.MaxResourceLen, true); err != nil {
		return nil, api.ToConnect(err)
	}
	out := &pb.GetResponse{Resource: r}
	err := s.node.Read(ctx, func(st *fsm.State) {
		if l, ok := st.Holder(r); ok {
			out.Holder = leasePB(&l, s.expiresIn(l.ID))
		}
		for _, w := range st.Waiters(r) {
			out.Waiters = append(out.Waiters, waiterPB(w))
		}
		if d, ok := st.LockDelay(r); ok {
			out.LockDelay = durPB(d)
		}
	})
	if addr, ok := leaderFor(req, err); ok {
		return relay(s.fwd.at(addr).leases.Get(ctx, forwarded(s.fwd, req, req.Msg)))
	}
	if err != nil {
		return nil, api.ToConnect(err)
	}
	return connect.NewResponse(out), nil
}

func (h leases) List(ctx context.Context, req *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	s := h.s
	after, limit, err := listParams(req.Msg)
	if err != nil {
		return nil, api.ToConnect(err)
	}
	out := &pb.ListResponse{}
	err = s.node.Read(ctx, func(st *fsm.State) {
		ls := st.Leases(after, limit+1, req.Msg.Prefix)
		if len(ls) > limit {
			ls = ls[:limit]
			out.NextPageToken = strconv.FormatUint(ls[limit-1].ID, 10)
		}
		for i := range ls {
			out.Leases = append(out.Leases, leasePB(&ls[i], s.expiresIn(ls[i].ID)))
		}
	})
	if addr, ok := leaderFor(req, err); ok {
		return relay(s.fwd.at(addr).leases.List(ctx, forwarded(s.fwd, req, req.Msg)))
	}
	if err != nil {
		return nil, api.ToConnect(err)
	}
	return connect.NewResponse(out), nil
}

// remainingNow caps a retried request's first answer by what is left on
// the leader's countdown now, since the caller counts from its retry. When
// the countdown is unknown it answers 0, and the client renews at once.
func (s *Server) remainingNow(id uint64, first time.Duration) time.Duration {
	if d, ok := s.node.ExpiresIn(id); ok {
		return min(first, d)
	}
	return 0
}

func (s *Server) expiresIn(id uint64) time.Duration {
	if d, ok := s.node.ExpiresIn(id); ok {
		return d
	}
	return -1
}
