package api

import (
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	c "github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// Short names for the columns, so that a row reads as one line.
const (
	worker, operator, admin = RoleWorker, RoleOperator, RoleAdmin
	leader, anyNode         = RouteLeader, RouteAnyNode
	read, byID, byValue     = RetryRead, RetryRequestID, RetryByValue
)

// procedures is the procedure table: one row per RPC of api/leasehold/v1.
// TestEveryProcedureHasARow keeps it whole.
var procedures = []*Procedure{
	// Leases.
	unary[pb.AcquireRequest, pb.AcquireResponse](c.LeasesAcquireProcedure, Row{Role: worker,
		Scope: touches("resources", func(m *pb.AcquireRequest) []string { return m.Resources }),
		Route: leader, Session: SessionOp, Rate: RateAcquire, Retry: byID}),
	unary[pb.RenewRequest, pb.RenewResponse](c.LeasesRenewProcedure, Row{Role: worker,
		Scope: bySecret, Route: leader, Session: SessionOp, Retry: byID}),
	unary[pb.ReleaseRequest, pb.ReleaseResponse](c.LeasesReleaseProcedure, Row{Role: worker,
		Scope: bySecret, Route: leader, Session: SessionOp, Retry: byID}),
	unary[pb.BatchRequest, pb.BatchResponse](c.LeasesBatchProcedure, Row{Role: worker,
		Scope: touches("acquires' resources", batchNames), Route: leader, Rate: RateAcquire, Retry: byID}),
	unary[pb.GetRequest, pb.GetResponse](c.LeasesGetProcedure, Row{Role: operator,
		Scope: touches("resource", func(m *pb.GetRequest) []string { return []string{m.Resource} }),
		Route: leader, Retry: read}),
	unary[pb.ListRequest, pb.ListResponse](c.LeasesListProcedure, Row{Role: operator,
		Scope: listing(func(m *pb.ListRequest) []string { return []string{m.Prefix} }), Route: leader, Retry: read}),

	// Fenced KV.
	unary[pb.PutRequest, pb.PutResponse](c.KVPutProcedure, Row{Role: worker,
		Scope: touches("key, fence", func(m *pb.PutRequest) []string { return append([]string{m.Key}, fenceNames(m.Fence)...) }),
		Route: leader, Retry: byID}),
	unary[pb.KVGetRequest, pb.KVGetResponse](c.KVGetProcedure, Row{Role: worker,
		Scope: touches("key", func(m *pb.KVGetRequest) []string { return []string{m.Key} }), Route: leader, Retry: read}),
	unary[pb.DeleteRequest, pb.DeleteResponse](c.KVDeleteProcedure, Row{Role: worker,
		Scope: touches("key, fence", func(m *pb.DeleteRequest) []string { return append([]string{m.Key}, fenceNames(m.Fence)...) }),
		Route: leader, Retry: byID}),
	unary[pb.CheckFenceRequest, pb.CheckFenceResponse](c.KVCheckFenceProcedure, Row{Role: worker,
		Scope: touches("fence", func(m *pb.CheckFenceRequest) []string {
			return fenceNames(&pb.Fence{Resource: m.Resource, Group: m.Group, Queue: m.Queue})
		}),
		Route: leader, Retry: read}),
	unary[pb.TxnRequest, pb.TxnResponse](c.KVTxnProcedure, Row{Role: worker,
		Scope: touches("keys, fence", txnNames), Route: leader, Retry: byID}),
	unary[pb.KVListRequest, pb.KVListResponse](c.KVListProcedure, Row{Role: worker,
		Scope: listing(func(m *pb.KVListRequest) []string { return []string{m.Prefix} }), Route: leader, Retry: read}),

	// Elections.
	unary[pb.CampaignRequest, pb.CampaignResponse](c.ElectionsCampaignProcedure, Row{Role: worker,
		Scope: touches("election", func(m *pb.CampaignRequest) []string { return []string{m.Election} }),
		Route: leader, Rate: RateAcquire, Retry: byID}),
	unary[pb.ProclaimRequest, pb.ProclaimResponse](c.ElectionsProclaimProcedure, Row{Role: worker,
		Scope: bySecret, Route: leader, Retry: byID}),
	unary[pb.ResignRequest, pb.ResignResponse](c.ElectionsResignProcedure, Row{Role: worker,
		Scope: bySecret, Route: leader, Retry: byID}),
	unary[pb.LeaderRequest, pb.LeaderResponse](c.ElectionsLeaderProcedure, Row{Role: worker,
		Scope: touches("election", func(m *pb.LeaderRequest) []string { return []string{m.Election} }),
		Route: leader, Retry: read}),
	stream[pb.ObserveRequest](c.ElectionsObserveProcedure, Row{Role: worker,
		Scope: touches("election", func(m *pb.ObserveRequest) []string { return []string{m.Election} }),
		Route: anyNode, Retry: read}),
	unary[pb.ElectionsListRequest, pb.ElectionsListResponse](c.ElectionsListProcedure, Row{Role: operator,
		Scope: listing(func(m *pb.ElectionsListRequest) []string { return []string{m.Prefix} }), Route: leader, Retry: read}),

	// Watches.
	stream[pb.WatchRequest](c.WatchWatchProcedure, Row{Role: worker,
		Scope: listing(func(m *pb.WatchRequest) []string {
			if len(m.Prefixes) == 0 {
				return []string{""} // everything
			}
			return m.Prefixes
		}),
		Route: anyNode, Retry: read}),

	// Inspection and administration.
	unary[pb.LocksRequest, pb.LocksResponse](c.AdminLocksProcedure, Row{Role: operator,
		Scope: touches("resource or prefix", func(m *pb.LocksRequest) []string {
			if m.Resource != "" {
				return []string{m.Resource}
			}
			return []string{m.Prefix}
		}),
		Route: leader, Retry: read}),
	unary[pb.ForceReleaseRequest, pb.ForceReleaseResponse](c.AdminForceReleaseProcedure, Row{Role: admin,
		Scope: touches("resource", func(m *pb.ForceReleaseRequest) []string { return []string{m.Resource} }),
		Route: leader, Retry: byID}),
	unary[pb.AuditRequest, pb.AuditResponse](c.AdminAuditProcedure, Row{Role: operator,
		Scope: auditRecords, Route: leader, Retry: read}),
	stream[pb.SnapshotRequest](c.AdminSnapshotProcedure, Row{Role: admin,
		Scope: wholeCluster, Route: anyNode, Retry: read}),

	// Cluster membership and status.
	unary[pb.MembersRequest, pb.MembersResponse](c.ClusterMembersProcedure, Row{Role: operator,
		Scope: nodeOnly, Route: anyNode, Retry: read}),
	unary[pb.StatusRequest, pb.StatusResponse](c.ClusterStatusProcedure, Row{Role: operator,
		Scope: nodeOnly, Route: anyNode, Retry: read}),
	unary[pb.AddVoterRequest, pb.AddVoterResponse](c.ClusterAddVoterProcedure, Row{Role: admin,
		Scope: wholeCluster, Route: leader, Retry: byValue}),
	unary[pb.RemoveServerRequest, pb.RemoveServerResponse](c.ClusterRemoveServerProcedure, Row{Role: admin,
		Scope: wholeCluster, Route: leader, Retry: byValue}),
	unary[pb.TransferLeaderRequest, pb.TransferLeaderResponse](c.ClusterTransferLeaderProcedure, Row{Role: admin,
		Scope: wholeCluster, Route: leader, Retry: RetryUnsafe}),

	// Idempotency keys.
	unary[pb.IdempotencyBeginRequest, pb.IdempotencyBeginResponse](c.IdempotencyBeginProcedure, Row{Role: worker,
		Scope: touches("key", func(m *pb.IdempotencyBeginRequest) []string { return []string{m.Key} }),
		Route: leader, Session: SessionCall, Retry: byID}),
	unary[pb.IdempotencyCompleteRequest, pb.IdempotencyCompleteResponse](c.IdempotencyCompleteProcedure, Row{Role: worker,
		Scope: touches("key", func(m *pb.IdempotencyCompleteRequest) []string { return []string{m.Key} }),
		Route: leader, Session: SessionCall, Retry: byID}),
	unary[pb.IdempotencyAbandonRequest, pb.IdempotencyAbandonResponse](c.IdempotencyAbandonProcedure, Row{Role: worker,
		Scope: touches("key", func(m *pb.IdempotencyAbandonRequest) []string { return []string{m.Key} }),
		Route: leader, Session: SessionCall, Retry: byID}),
	unary[pb.IdempotencyGetRequest, pb.IdempotencyGetResponse](c.IdempotencyGetProcedure, Row{Role: worker,
		Scope: touches("key", func(m *pb.IdempotencyGetRequest) []string { return []string{m.Key} }),
		Route: leader, Retry: read}),
	unary[pb.IdempotencyListRequest, pb.IdempotencyListResponse](c.IdempotencyListProcedure, Row{Role: worker,
		Scope: listing(func(m *pb.IdempotencyListRequest) []string { return []string{m.Prefix} }), Route: leader, Retry: read}),

	// Keyed queues: workers send, receive and settle; operators inspect;
	// admins create, purge, delete and redrive.
	unary[pb.QueuesSendRequest, pb.QueuesSendResponse](c.QueuesSendProcedure, Row{Role: worker,
		Scope: queue(func(m *pb.QueuesSendRequest) string { return m.Queue }), Route: leader, Session: SessionCall, Retry: byID}),
	unary[pb.QueuesSendBatchRequest, pb.QueuesSendBatchResponse](c.QueuesSendBatchProcedure, Row{Role: worker,
		Scope: queue(func(m *pb.QueuesSendBatchRequest) string { return m.Queue }), Route: leader, Session: SessionCall, Retry: byID}),
	unary[pb.QueuesReceiveRequest, pb.QueuesReceiveResponse](c.QueuesReceiveProcedure, Row{Role: worker,
		Scope: queue(func(m *pb.QueuesReceiveRequest) string { return m.Queue }), Route: leader, Session: SessionCall, Retry: byID}),
	unary[pb.QueuesAckRequest, pb.QueuesAckResponse](c.QueuesAckProcedure, Row{Role: worker,
		Scope: queue(func(m *pb.QueuesAckRequest) string { return m.Queue }), Route: leader, Session: SessionCall, Retry: byID}),
	unary[pb.QueuesAckBatchRequest, pb.QueuesAckBatchResponse](c.QueuesAckBatchProcedure, Row{Role: worker,
		Scope: queue(func(m *pb.QueuesAckBatchRequest) string { return m.Queue }), Route: leader, Session: SessionCall, Retry: byID}),
	unary[pb.QueuesNackRequest, pb.QueuesNackResponse](c.QueuesNackProcedure, Row{Role: worker,
		Scope: queue(func(m *pb.QueuesNackRequest) string { return m.Queue }), Route: leader, Session: SessionCall, Retry: byID}),
	// Extend has no request ID to make a stream's resend act once; sent
	// twice, it sets the same visibility again.
	unary[pb.QueuesExtendRequest, pb.QueuesExtendResponse](c.QueuesExtendProcedure, Row{Role: worker,
		Scope: queue(func(m *pb.QueuesExtendRequest) string { return m.Queue }), Route: leader, Retry: byValue}),
	unary[pb.QueuesListRequest, pb.QueuesListResponse](c.QueuesListProcedure, Row{Role: operator,
		Scope: listing(func(m *pb.QueuesListRequest) []string { return []string{m.Prefix} }), Route: leader, Retry: read}),
	unary[pb.QueuesGetRequest, pb.QueuesGetResponse](c.QueuesGetProcedure, Row{Role: operator,
		Scope: queue(func(m *pb.QueuesGetRequest) string { return m.Queue }), Route: leader, Retry: read}),
	unary[pb.QueuesDeadLettersRequest, pb.QueuesDeadLettersResponse](c.QueuesDeadLettersProcedure, Row{Role: operator,
		Scope: queue(func(m *pb.QueuesDeadLettersRequest) string { return m.Queue }), Route: leader, Retry: read}),
	unary[pb.QueuesCreateRequest, pb.QueuesCreateResponse](c.QueuesCreateProcedure, Row{Role: admin,
		Scope: queue(func(m *pb.QueuesCreateRequest) string { return m.Queue }), Route: leader, Retry: byID}),
	unary[pb.QueuesPurgeRequest, pb.QueuesPurgeResponse](c.QueuesPurgeProcedure, Row{Role: admin,
		Scope: queue(func(m *pb.QueuesPurgeRequest) string { return m.Queue }), Route: leader, Retry: byID}),
	unary[pb.QueuesDeleteRequest, pb.QueuesDeleteResponse](c.QueuesDeleteProcedure, Row{Role: admin,
		Scope: queue(func(m *pb.QueuesDeleteRequest) string { return m.Queue }), Route: leader, Retry: byID}),
	unary[pb.QueuesRedriveRequest, pb.QueuesRedriveResponse](c.QueuesRedriveProcedure, Row{Role: admin,
		Scope: queue(func(m *pb.QueuesRedriveRequest) string { return m.Queue }), Route: leader, Retry: byID}),

	// Partition groups. Create, Grow and AckRevocation are retried safely
	// by their values, Join by its secret.
	unary[pb.GroupsCreateRequest, pb.GroupsCreateResponse](c.GroupsCreateProcedure, Row{Role: operator,
		Scope: group(func(m *pb.GroupsCreateRequest) string { return m.Group }), Route: leader, Retry: byValue}),
	unary[pb.GroupsGrowRequest, pb.GroupsGrowResponse](c.GroupsGrowProcedure, Row{Role: operator,
		Scope: group(func(m *pb.GroupsGrowRequest) string { return m.Group }), Route: leader, Retry: byValue}),
	unary[pb.GroupsDeleteRequest, pb.GroupsDeleteResponse](c.GroupsDeleteProcedure, Row{Role: admin,
		Scope: group(func(m *pb.GroupsDeleteRequest) string { return m.Group }), Route: leader, Retry: byValue}),
	unary[pb.GroupsListRequest, pb.GroupsListResponse](c.GroupsListProcedure, Row{Role: operator,
		Scope: listing(func(m *pb.GroupsListRequest) []string { return []string{m.Prefix} }), Route: leader, Retry: read}),
	unary[pb.GroupsGetRequest, pb.GroupsGetResponse](c.GroupsGetProcedure, Row{Role: worker,
		Scope: group(func(m *pb.GroupsGetRequest) string { return m.Group }), Route: leader, Retry: read}),
	unary[pb.GroupsJoinRequest, pb.GroupsJoinResponse](c.GroupsJoinProcedure, Row{Role: worker,
		Scope: group(func(m *pb.GroupsJoinRequest) string { return m.Group }), Route: leader, Retry: byID}),
	unary[pb.GroupsLeaveRequest, pb.GroupsLeaveResponse](c.GroupsLeaveProcedure, Row{Role: worker,
		Scope: bySecret, Route: leader, Retry: byID}),
	unary[pb.GroupsAckRevocationRequest, pb.GroupsAckRevocationResponse](c.GroupsAckRevocationProcedure, Row{Role: worker,
		Scope: group(func(m *pb.GroupsAckRevocationRequest) string { return m.Group }), Route: leader, Session: SessionCall, Retry: byValue}),
	stream[pb.GroupsAssignmentsRequest](c.GroupsAssignmentsProcedure, Row{Role: worker,
		Scope: group(func(m *pb.GroupsAssignmentsRequest) string { return m.Group }), Route: anyNode, Retry: read}),

	// Barriers and latches (docs/barriers.md): workers create, arrive,
	// count down, wait, reset and delete under their prefixes; operators
	// list. Create is retried by its values, the rest by request id.
	unary[pb.BarriersCreateRequest, pb.BarriersCreateResponse](c.BarriersCreateProcedure, Row{Role: worker,
		Scope: barrier(func(m *pb.BarriersCreateRequest) string { return m.Name }), Route: leader, Retry: byValue}),
	unary[pb.BarriersArriveRequest, pb.BarriersArriveResponse](c.BarriersArriveProcedure, Row{Role: worker,
		Scope: barrier(func(m *pb.BarriersArriveRequest) string { return m.Name }), Route: leader, Rate: RateAcquire, Retry: byID}),
	unary[pb.BarriersCountDownRequest, pb.BarriersCountDownResponse](c.BarriersCountDownProcedure, Row{Role: worker,
		Scope: barrier(func(m *pb.BarriersCountDownRequest) string { return m.Name }), Route: leader, Retry: byID}),
	unary[pb.BarriersWaitRequest, pb.BarriersWaitResponse](c.BarriersWaitProcedure, Row{Role: worker,
		Scope: barrier(func(m *pb.BarriersWaitRequest) string { return m.Name }), Route: leader, Retry: read}),
	unary[pb.BarriersResetRequest, pb.BarriersResetResponse](c.BarriersResetProcedure, Row{Role: worker,
		Scope: barrier(func(m *pb.BarriersResetRequest) string { return m.Name }), Route: leader, Retry: byID}),
	unary[pb.BarriersDeleteRequest, pb.BarriersDeleteResponse](c.BarriersDeleteProcedure, Row{Role: worker,
		Scope: barrier(func(m *pb.BarriersDeleteRequest) string { return m.Name }), Route: leader, Retry: byID}),
	unary[pb.BarriersGetRequest, pb.BarriersGetResponse](c.BarriersGetProcedure, Row{Role: worker,
		Scope: barrier(func(m *pb.BarriersGetRequest) string { return m.Name }), Route: leader, Retry: read}),
	unary[pb.BarriersListRequest, pb.BarriersListResponse](c.BarriersListProcedure, Row{Role: operator,
		Scope: listing(func(m *pb.BarriersListRequest) []string { return []string{m.Prefix} }), Route: leader, Retry: read}),

	// The session stream: lease ops, and the calls above marked
	// SessionCall, each checked, charged and retried as its unary call.
	stream[pb.SessionRequest](c.SessionsSessionProcedure, Row{Role: worker,
		Scope: perOp, Route: anyNode, Session: SessionStream, Rate: RateAcquire, Retry: byID}),
}

func queue[Req any](f func(*Req) string) Scope {
	return touches("queue", func(m *Req) []string { return []string{f(m)} })
}

func barrier[Req any](f func(*Req) string) Scope {
	return touches("barrier", func(m *Req) []string { return []string{f(m)} })
}

func group[Req any](f func(*Req) string) Scope {
	return touches("group", func(m *Req) []string { return []string{f(m)} })
}

// batchNames are the resources of a batch's acquires (its renewals and
// releases are proven by their secrets).
func batchNames(m *pb.BatchRequest) []string {
	var out []string
	for _, op := range m.GetOps() {
		out = append(out, op.GetAcquire().GetResources()...)
	}
	return out
}

// txnNames is every key a transaction reads or writes, and its fence's
// target: a token may compare only keys it may write.
func txnNames(m *pb.TxnRequest) []string {
	out := fenceNames(m.Fence)
	for _, c := range m.Compares {
		out = append(out, c.GetKey())
	}
	for _, op := range append(m.ThenOps[:len(m.ThenOps):len(m.ThenOps)], m.ElseOps...) {
		out = append(out, op.GetPut().GetKey()+op.GetDelete().GetKey())
	}
	return out
}

// fenceNames are the names a fence's target lies under: its resource,
// group or queue. Each one named is checked, so a fence naming two
// (refused later) cannot pass on their concatenation.
func fenceNames(f *pb.Fence) []string {
	if f == nil {
		return nil
	}
	var out []string
	for _, n := range []string{f.Resource, f.Group, f.Queue} {
		if n != "" {
			out = append(out, n)
		}
	}
	if out == nil {
		return []string{""}
	}
	return out
}
