package client

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

// Conversions from the generated API types to the client's result types;
// the only place that reads those messages' fields for callers.

// dur is d, or 0 when the server left it unset.
func dur(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// stamp is t, or the zero time when the server left it unset.
func stamp(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

func leaseInfo(l *pb.Lease) *LeaseInfo {
	if l == nil {
		return nil
	}
	return &LeaseInfo{
		Lease: leasehold.Lease{
			ID: l.Id, Token: l.Token, Resources: l.Resources, Owner: l.Owner, Operation: l.Operation,
			TTL: dur(l.Ttl), LockDelay: dur(l.LockDelay), MaxHold: dur(l.MaxHold), Metadata: l.Metadata,
			AcquiredAt: stamp(l.AcquiredAt), RenewedAt: stamp(l.RenewedAt), RenewCount: l.RenewCount,
			Progress: l.Progress, Semaphore: l.Semaphore, Limit: int(l.Limit),
		},
		ExpiresIn:    dur(l.ExpiresIn),
		ExpiresKnown: l.ExpiresIn != nil,
	}
}

func leaseInfos(ls []*pb.Lease) []LeaseInfo {
	out := make([]LeaseInfo, 0, len(ls))
	for _, l := range ls {
		if li := leaseInfo(l); li != nil {
			out = append(out, *li)
		}
	}
	return out
}

func resourceInfo(r *pb.GetResponse) *ResourceInfo {
	out := &ResourceInfo{Resource: r.Resource, Holder: leaseInfo(r.Holder), LockDelay: dur(r.LockDelay),
		Limit: int(r.Limit), Slots: leaseInfos(r.Slots)}
	for _, w := range r.Waiters {
		out.Waiters = append(out.Waiters, Waiter{
			Resources: w.Resources, Owner: w.Owner, Operation: w.Operation, Wait: dur(w.Wait), QueuedAt: stamp(w.QueuedAt),
		})
	}
	return out
}

func lockInfo(l *pb.Lock) LockInfo {
	out := LockInfo{
		Resource: l.Resource, HeldFor: dur(l.HeldFor), Waiters: int(l.Waiters), OldestWait: dur(l.OldestWait),
		RenewalOverdue: l.RenewalOverdue, ProgressStale: l.ProgressStale, LockDelay: dur(l.LockDelay),
	}
	if l.LeaseId != 0 {
		out.Holder = &LeaseInfo{
			Lease: leasehold.Lease{
				ID: l.LeaseId, Token: l.Token, Resources: l.LeaseResources, Owner: l.Owner, Operation: l.Operation,
				TTL: dur(l.Ttl), MaxHold: dur(l.MaxHold), Metadata: l.Metadata,
				AcquiredAt: stamp(l.AcquiredAt), RenewedAt: stamp(l.RenewedAt), RenewCount: l.RenewCount,
				Progress: l.Progress, ProgressAt: stamp(l.ProgressAt),
			},
			ExpiresIn:    dur(l.ExpiresIn),
			ExpiresKnown: l.ExpiresIn != nil,
		}
	}
	for _, w := range l.WaiterList {
		out.WaiterList = append(out.WaiterList, Waiter{
			Resources: w.Resources, Owner: w.Owner, Operation: w.Operation, Wait: dur(w.Wait),
			QueuedAt: stamp(w.QueuedAt), Waiting: dur(w.Waiting),
		})
	}
	return out
}

func auditRecord(a *pb.AuditRecord) AuditRecord {
	return AuditRecord{
		Index: a.Index, Time: stamp(a.Time), Actor: a.Actor, Action: a.Action, Resource: a.Resource,
		LeaseID: a.LeaseId, Token: a.Token, Owner: a.Owner, Operation: a.Operation, Reason: a.Reason,
	}
}

func member(m *pb.Member) Member {
	return Member{ID: m.Id, RaftAddr: m.RaftAddr, Voter: m.Voter, Leader: m.Leader}
}

func nodeStatus(n *pb.NodeStatus) NodeStatus {
	return NodeStatus{
		ID: n.Id, RaftAddr: n.RaftAddr, State: n.State, Term: n.Term, CommitIndex: n.CommitIndex,
		AppliedIndex: n.AppliedIndex, LastIndex: n.LastIndex, LeaderID: n.LeaderId,
		LastContact: dur(n.LastContact), Error: n.Error,
	}
}

// convertAll applies f to every element of in.
func convertAll[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
