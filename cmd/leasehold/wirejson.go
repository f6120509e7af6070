package main

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/client"
)

// The --json output of the inspection commands is the API's own JSON
// (protojson of its messages), as curl shows it. The client hands out plain
// Go types, so these put them back into the messages, setting a field
// exactly when the server sets it (see server/convert.go).

// durWire is d, unset when 0 (the server's durPB).
func durWire(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// timeWire is t, unset when zero (the server's timePB).
func timeWire(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func leaseWire(l *client.LeaseInfo) *pb.Lease {
	if l == nil {
		return nil
	}
	out := &pb.Lease{
		Id: l.ID, Token: l.Token, Resources: l.Resources, Owner: l.Owner, Operation: l.Operation,
		Ttl: durWire(l.TTL), LockDelay: durWire(l.LockDelay), MaxHold: durWire(l.MaxHold), Metadata: l.Metadata,
		AcquiredAt: timeWire(l.AcquiredAt), RenewedAt: timeWire(l.RenewedAt), RenewCount: l.RenewCount,
		Progress: l.Progress, Semaphore: l.Semaphore, Limit: uint32(l.Limit),
	}
	if l.ExpiresKnown {
		out.ExpiresIn = durationpb.New(l.ExpiresIn)
	}
	return out
}

func leasesWire(ls []client.LeaseInfo) []*pb.Lease {
	out := make([]*pb.Lease, len(ls))
	for i := range ls {
		out[i] = leaseWire(&ls[i])
	}
	return out
}

func resourceWire(r *client.ResourceInfo) *pb.GetResponse {
	out := &pb.GetResponse{Resource: r.Resource, Holder: leaseWire(r.Holder), LockDelay: durWire(r.LockDelay),
		Limit: uint32(r.Limit), Slots: leasesWire(r.Slots)}
	for _, w := range r.Waiters {
		out.Waiters = append(out.Waiters, &pb.Waiter{
			Resources: w.Resources, Owner: w.Owner, Operation: w.Operation, Wait: durWire(w.Wait), QueuedAt: timeWire(w.QueuedAt),
		})
	}
	return out
}

func lockWire(l client.LockInfo) *pb.Lock {
	out := &pb.Lock{
		Resource: l.Resource, Waiters: uint32(l.Waiters), RenewalOverdue: l.RenewalOverdue,
		ProgressStale: l.ProgressStale, LockDelay: durWire(l.LockDelay),
	}
	if l.Waiters > 0 {
		out.OldestWait = durationpb.New(l.OldestWait)
	}
	for _, w := range l.WaiterList {
		out.WaiterList = append(out.WaiterList, &pb.QueuedWaiter{
			Resources: w.Resources, Owner: w.Owner, Operation: w.Operation, Wait: durWire(w.Wait),
			QueuedAt: timeWire(w.QueuedAt), Waiting: durationpb.New(w.Waiting),
		})
	}
	if h := l.Holder; h != nil {
		out.LeaseId, out.Token, out.LeaseResources, out.Owner, out.Operation = h.ID, h.Token, h.Resources, h.Owner, h.Operation
		out.Metadata, out.Ttl, out.MaxHold = h.Metadata, durWire(h.TTL), durWire(h.MaxHold)
		out.AcquiredAt, out.RenewedAt, out.RenewCount = timeWire(h.AcquiredAt), timeWire(h.RenewedAt), h.RenewCount
		out.Progress, out.ProgressAt = h.Progress, timeWire(h.ProgressAt)
		out.HeldFor = durationpb.New(l.HeldFor)
		if h.ExpiresKnown {
			out.ExpiresIn = durationpb.New(h.ExpiresIn)
		}
	}
	return out
}

func locksWire(ls []client.LockInfo) *pb.LocksResponse {
	out := &pb.LocksResponse{}
	for _, l := range ls {
		out.Locks = append(out.Locks, lockWire(l))
	}
	return out
}

func auditWire(recs []client.AuditRecord, truncated bool) *pb.AuditResponse {
	out := &pb.AuditResponse{Truncated: truncated}
	for _, a := range recs {
		out.Records = append(out.Records, &pb.AuditRecord{
			Index: a.Index, Time: timeWire(a.Time), Actor: a.Actor, Action: a.Action, Resource: a.Resource,
			LeaseId: a.LeaseID, Token: a.Token, Owner: a.Owner, Operation: a.Operation, Reason: a.Reason,
		})
	}
	return out
}

func membersWire(ms []client.Member) *pb.MembersResponse {
	out := &pb.MembersResponse{}
	for _, m := range ms {
		out.Members = append(out.Members, &pb.Member{Id: m.ID, RaftAddr: m.RaftAddr, Voter: m.Voter, Leader: m.Leader})
	}
	return out
}

func statusWire(ns []client.NodeStatus) *pb.StatusResponse {
	out := &pb.StatusResponse{}
	for _, n := range ns {
		s := &pb.NodeStatus{
			Id: n.ID, RaftAddr: n.RaftAddr, State: n.State, Term: n.Term, CommitIndex: n.CommitIndex,
			AppliedIndex: n.AppliedIndex, LastIndex: n.LastIndex, LeaderId: n.LeaderID, Error: n.Error,
		}
		if n.Error == "" { // a node that answered reports its last contact, even 0
			s.LastContact = durationpb.New(n.LastContact)
		}
		out.Nodes = append(out.Nodes, s)
	}
	return out
}
