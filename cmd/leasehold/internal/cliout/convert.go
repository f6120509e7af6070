package cliout

import (
	"unicode/utf8"

	"github.com/leasehold/leasehold/client"
)

// From the client's plain Go types to the printed structures.

// FromLease is l as printed, nil for nil.
func FromLease(l *client.LeaseInfo) *Lease {
	if l == nil {
		return nil
	}
	return &Lease{
		LeaseID: l.ID, Token: l.Token, Resources: nonNil(l.Resources), Owner: l.Owner, Operation: l.Operation,
		TTL: DurSet(l.TTL), LockDelay: DurSet(l.LockDelay), MaxHold: DurSet(l.MaxHold), Metadata: l.Metadata,
		AcquiredAt: Time(l.AcquiredAt), RenewedAt: Time(l.RenewedAt), RenewCount: l.RenewCount,
		Progress: l.Progress, ProgressAt: Time(l.ProgressAt), ExpiresIn: DurIf(l.ExpiresIn, l.ExpiresKnown),
		Semaphore: l.Semaphore, Limit: l.Limit,
	}
}

// FromLeases is list's output.
func FromLeases(ls []client.LeaseInfo) Leases {
	out := Leases{Leases: []Lease{}}
	for i := range ls {
		out.Leases = append(out.Leases, *FromLease(&ls[i]))
	}
	return out
}

func fromWaiters(ws []client.Waiter) []Waiter {
	out := []Waiter{}
	for _, w := range ws {
		out = append(out, Waiter{Resources: nonNil(w.Resources), Owner: w.Owner, Operation: w.Operation,
			Wait: DurSet(w.Wait), QueuedAt: Time(w.QueuedAt), Waiting: DurSet(w.Waiting)})
	}
	return out
}

// FromResource is status's output.
func FromResource(r *client.ResourceInfo) Resource {
	out := Resource{Resource: r.Resource, Holder: FromLease(r.Holder), Waiters: fromWaiters(r.Waiters), LockDelay: DurSet(r.LockDelay), Limit: r.Limit}
	for i := range r.Slots {
		out.Slots = append(out.Slots, *FromLease(&r.Slots[i]))
	}
	return out
}

// FromLock is one resource of locks.
func FromLock(l client.LockInfo) Lock {
	out := Lock{
		Resource: l.Resource, Holder: FromLease(l.Holder), WaiterCount: l.Waiters, Waiters: fromWaiters(l.WaiterList),
		RenewalOverdue: l.RenewalOverdue, ProgressStale: l.ProgressStale, LockDelay: DurSet(l.LockDelay),
		OldestWait: DurIf(l.OldestWait, l.Waiters > 0),
	}
	if l.Holder != nil {
		out.HeldFor = Dur(l.HeldFor)
	}
	return out
}

// FromLocks is locks' output.
func FromLocks(ls []client.LockInfo) Locks {
	out := Locks{Locks: []Lock{}}
	for _, l := range ls {
		out.Locks = append(out.Locks, FromLock(l))
	}
	return out
}

// FromAudit is audit's output.
func FromAudit(recs []client.AuditRecord, truncated bool) Audit {
	out := Audit{Records: []AuditRecord{}, Truncated: truncated}
	for _, a := range recs {
		out.Records = append(out.Records, AuditRecord{Index: a.Index, Time: Time(a.Time), Actor: a.Actor, Action: a.Action,
			Resource: a.Resource, LeaseID: a.LeaseID, Token: a.Token, Owner: a.Owner, Operation: a.Operation, Reason: a.Reason})
	}
	return out
}

// FromMembers is cluster members' output.
func FromMembers(ms []client.Member) Members {
	out := Members{Members: []Member{}}
	for _, m := range ms {
		out.Members = append(out.Members, Member{NodeID: m.ID, RaftAddr: m.RaftAddr, Voter: m.Voter, Leader: m.Leader})
	}
	return out
}

// FromNodeStatus is cluster status' output.
func FromNodeStatus(ns []client.NodeStatus) ClusterStatus {
	out := ClusterStatus{Nodes: []NodeStatus{}}
	for _, n := range ns {
		s := NodeStatus{NodeID: n.ID, RaftAddr: n.RaftAddr, State: n.State, Term: n.Term, CommitIndex: n.CommitIndex,
			AppliedIndex: n.AppliedIndex, LastIndex: n.LastIndex, LeaderNodeID: n.LeaderID, Error: n.Error}
		if n.Error == "" { // a node that answered reports its last contact, even 0
			s.LastContact = Dur(n.LastContact)
		}
		out.Nodes = append(out.Nodes, s)
	}
	return out
}

// FromElection is one election.
func FromElection(e client.ElectionInfo) Election {
	return Election{Election: e.Name, Leading: e.LeaseID != 0, Value: e.Value, LeaseID: e.LeaseID, Token: e.Token,
		Owner: e.Owner, Since: Time(e.Since), Candidates: e.Candidates, ExpiresIn: DurSet(e.ExpiresIn)}
}

// FromElections is elections' output.
func FromElections(es []client.ElectionInfo) Elections {
	out := Elections{Elections: []Election{}}
	for _, e := range es {
		out.Elections = append(out.Elections, FromElection(e))
	}
	return out
}

// FromEvent is one line of watch.
func FromEvent(e client.Event) Event {
	out := Event{Index: e.Index, Kind: e.Kind, LeaseID: e.LeaseID, Token: e.Token, Resources: e.Resources,
		Owner: e.Owner, Operation: e.Operation, Reason: e.Reason, Key: e.Key, Version: e.Version}
	if e.Kind == "put" || e.Kind == "leader_changed" {
		out.Value, out.ValueBase64 = Value(e.Value)
	}
	return out
}

// Value splits b into the two ways a value is printed: as text when it is
// UTF-8, else as bytes (base64 in JSON).
func Value(b []byte) (*string, []byte) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	return nil, b
}

// FromIdem is one idempotency key.
func FromIdem(r client.IdemInfo) IdemRecord {
	return IdemRecord{Key: r.Key, State: r.State, Token: r.Token, Owner: r.Owner, StartedAt: Time(r.StartedAt),
		CompletedAt: Time(r.CompletedAt), Retention: DurSet(r.Retention), ResultSize: r.ResultSize, Result: r.Result}
}

// nonNil keeps an empty list a list ([]) in JSON, not null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
