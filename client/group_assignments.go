package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

// AssignmentState is what happened to a member's partition.
type AssignmentState string

const (
	// Added: the member owns the partition with the epoch.
	Added AssignmentState = "added"
	// Revoking: the member must stop working on the partition and then
	// acknowledge (Membership.AckRevocation) within RevokeWithin, or its
	// session is ended.
	Revoking AssignmentState = "revoking"
	// Removed: the member no longer owns the partition.
	Removed AssignmentState = "removed"
)

// Assignment is one partition of a member and its state.
type Assignment struct {
	Partition    int
	Epoch        uint64 // the grant's fencing token
	State        AssignmentState
	RevokeWithin time.Duration // Revoking: time left to acknowledge
}

// AssignmentUpdate is one answer of an assignment stream, applied at log
// index Index.
type AssignmentUpdate struct {
	Index uint64
	// Initial: Changes lists every partition the member holds now (Added
	// or Revoking); anything learnt before is replaced. The first update
	// is initial, and so is one after the stream had to start over.
	Initial bool
	Changes []Assignment
	// Ended: the member's session ended; it holds nothing and the stream
	// stops.
	Ended      bool
	Partitions int // the group's partition count
}

// AssignmentStream is a running stream of a member's assignments: read
// Updates until it closes, then Err says why.
type AssignmentStream struct {
	updates chan AssignmentUpdate
	done    chan struct{}
	err     error
}

// Updates delivers the member's partitions, then every change in log
// order, until the stream ends.
func (s *AssignmentStream) Updates() <-chan AssignmentUpdate { return s.updates }

// Err waits for the stream to end and says why: nil if ctx ended or the
// session ended (the last update then has Ended set); ErrClosed after the
// client's Close; one matching leasehold.ErrUnavailable if no node
// opened it within Config.Timeout (as Watch.Err); or an error the servers
// refused the stream with.
func (s *AssignmentStream) Err() error {
	<-s.done
	return s.err
}

// Assignments streams the member's partitions: first those it holds,
// then every change (added, revoking, removed), until ctx ends or the
// session does. Any node serves it from its own log; when one fails, the
// stream resumes on the next from the last index seen (or starts over
// with an initial update if no node keeps that far back).
func (m *Membership) Assignments(ctx context.Context) *AssignmentStream {
	c := m.lease.c
	s := &AssignmentStream{updates: make(chan AssignmentUpdate, 16), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.bg, cancel) // Close ends it too
	go func() {
		defer close(s.done)
		defer close(s.updates)
		defer stop()
		defer cancel()
		s.err = m.assignments(ctx, s)
		if c.closed.Load() && s.err == nil {
			s.err = ErrClosed
		}
	}()
	return s
}

func (m *Membership) assignments(ctx context.Context, s *AssignmentStream) error {
	c := m.lease.c
	var from *uint64
	var retry backoff
	// Until a stream first opens, it is bounded as a call is; after that
	// it resumes until ctx ends.
	octx, stop := c.bound(ctx, 0)
	defer stop()
	var last error
	for {
		if c.closed.Load() {
			return ErrClosed
		}
		i := int(c.cur.Load()) % len(c.nodes)
		req := connect.NewRequest(&pb.GroupsAssignmentsRequest{Group: m.group, Member: m.member, LeaseId: m.lease.id, FromIndex: from})
		if c.cfg.Token != "" {
			req.Header().Set("Authorization", "Bearer "+c.cfg.Token)
		}
		progressed, opened, ended, err := m.assignmentStream(ctx, octx, &c.nodes[i], req, s, &from)
		if ended || ctx.Err() != nil {
			return nil
		}
		if progressed {
			retry = backoff{}
		}
		if opened {
			stop()
			octx = ctx // no longer bounded
		}
		if octx.Err() != nil {
			return c.ended(octx, last)
		}
		e := api.FromConnect(err)
		last = e
		switch {
		case errors.Is(e, leasehold.ErrOutOfRange):
			from = nil // start over: the initial update replaces what the reader knew
		case errors.Is(e, leasehold.ErrNotFound):
			// A node that has not applied the Join yet, or the session is
			// over: the lease says which.
			select {
			case <-m.lease.Done():
				return fmt.Errorf("assignments of %s in %s: %w", m.member, m.group, m.lease.Err())
			default:
			}
		case err == nil, errors.Is(e, leasehold.ErrUnavailable), errors.Is(e, leasehold.ErrLimit), !connect.IsWireError(err):
			// The node went away or cut the stream off: resume on the next.
		default:
			return e
		}
		if !c.moveOn(octx, i, retry.next()) {
			if ctx.Err() != nil {
				return nil
			}
			return c.ended(octx, e)
		}
	}
}

// assignmentStream reads one node's stream into s until it ends; opened
// says it answered. Its first answer must come within RequestTimeout and
// before octx ends.
func (m *Membership) assignmentStream(ctx, octx context.Context, e *endpoint, req *connect.Request[pb.GroupsAssignmentsRequest],
	s *AssignmentStream, from **uint64) (progressed, opened, ended bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	open := opening(octx, e.url, m.lease.c.cfg.RequestTimeout, cancel)
	defer open()
	st, err := e.groups.Assignments(ctx, req)
	if err != nil {
		return false, false, false, streamErr(ctx, err)
	}
	defer st.Close()
	for st.Receive() {
		open()
		opened = true
		msg := st.Msg()
		if *from != nil && !msg.Initial && msg.Index <= **from {
			continue // nothing new (the opening mark of a resumed stream)
		}
		u := AssignmentUpdate{Index: msg.Index, Initial: msg.Initial, Ended: msg.Ended, Partitions: int(msg.GroupPartitions),
			Changes: convertAll(msg.Changes, assignment)}
		select {
		case s.updates <- u:
		case <-ctx.Done():
			return progressed, opened, false, ctx.Err()
		}
		idx := msg.Index
		*from, progressed = &idx, true
		if msg.Ended {
			return progressed, opened, true, nil
		}
	}
	if err := st.Err(); err != nil {
		return progressed, opened, false, streamErr(ctx, err)
	}
	return progressed, opened, false, fmt.Errorf("assignment stream from %s ended", e.url)
}

func assignment(a *pb.Assignment) Assignment {
	out := Assignment{Partition: int(a.GetPartition()), Epoch: a.GetEpoch(), RevokeWithin: dur(a.GetRevokeWithin())}
	switch a.GetState() {
	case pb.AssignmentState_ASSIGNMENT_STATE_ADDED:
		out.State = Added
	case pb.AssignmentState_ASSIGNMENT_STATE_REVOKING:
		out.State = Revoking
	case pb.AssignmentState_ASSIGNMENT_STATE_REMOVED:
		out.State = Removed
	}
	return out
}
