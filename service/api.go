package service

import (
	"context"
	"errors"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/cluster"
)

// The service as the API front sees it: one interface per primitive,
// with typed requests and results. A method reads its caller from its
// context (WithCaller) and builds the state machine's commands itself; a
// request's fields are what the front checked, and nothing of the log or
// raft crosses. *Service implements them all (API); a handler test gives
// the front a fake instead.

// Leases are locks, semaphores and their waiting (leases.go, reads.go).
type Leases interface {
	Acquire(ctx context.Context, req *AcquireRequest) (Grant, error)
	Renew(ctx context.Context, req *RenewRequest) (Grant, error)
	Release(ctx context.Context, req *ReleaseRequest) (Grant, error)
	// Batch proposes ops in one log entry and answers each; a queued
	// acquire is then the caller's to hold (HoldPlace) or, if its
	// caller left, withdraw (LeftEarly).
	Batch(ctx context.Context, ops []LeaseOp) ([]LeaseResult, error)
	LeftEarly(ctx context.Context, reqs ...*AcquireRequest) error
	HoldPlace(req *AcquireRequest)
	Holding(ctx context.Context, resource string) (Holding, error)
	List(ctx context.Context, after uint64, limit int, prefix string) ([]Held, bool, error)
}

// Admin is the operators' inspection, forced release, audit log and
// backup (admin.go).
type Admin interface {
	Lock(ctx context.Context, resource string) (Lock, error)
	Locks(ctx context.Context, after uint64, limit int, prefix string) ([]Lock, uint64, error)
	ForceRelease(ctx context.Context, req *ForceReleaseRequest) (Grant, error)
	Audit(ctx context.Context, since time.Duration, limit int) ([]leasehold.AuditRecord, bool, error)
	Backup() Backup
}

// KV is the fenced key-value space (kv.go).
type KV interface {
	Put(ctx context.Context, req *PutRequest) (uint64, error)
	Delete(ctx context.Context, req *DeleteRequest) (uint64, error)
	Txn(ctx context.Context, req *TxnRequest) (leasehold.TxnResult, uint64, error)
	Get(ctx context.Context, key string) (leasehold.Item, error)
	ListKeys(ctx context.Context, prefix, after string, limit int) ([]leasehold.KeyItem, bool, error)
	CheckFence(ctx context.Context, f leasehold.Fence) error
}

// Cluster is the membership and the members' status (cluster.go).
type Cluster interface {
	Members(ctx context.Context) ([]Member, error)
	AddVoter(ctx context.Context, id, raftAddr string) error
	RemoveServer(ctx context.Context, id string) error
	TransferLeader(ctx context.Context, id string) error
	LocalStatus() NodeStatus
	// Status asks the other members through ask.
	Status(ctx context.Context, ask AskStatus) ([]MemberStatus, error)
}

// Elections are leaderships, each a lease on the election's name
// (elections.go).
type Elections interface {
	Campaign(ctx context.Context, req *CampaignRequest) (Grant, error)
	Proclaim(ctx context.Context, req *ProclaimRequest) (Grant, error)
	Resign(ctx context.Context, req *ReleaseRequest) (Grant, error)
	Leader(ctx context.Context, name string) (leasehold.Election, time.Duration, bool, error)
	Elections(ctx context.Context, prefix, after string, limit int) ([]leasehold.Election, bool, error)
	Observe(ctx context.Context, name string, from uint64, resume bool) (Observation, error)
}

// Watches are streams of the node's applied changes (watch.go).
type Watches interface {
	Watch(ctx context.Context, req WatchRequest) (*Watcher, error)
}

// Idempotency is the idempotency keys (idem.go).
type Idempotency interface {
	IdemBegin(ctx context.Context, req *IdemBeginRequest) (IdemBegun, error)
	IdemComplete(ctx context.Context, req *IdemCompleteRequest) error
	IdemAbandon(ctx context.Context, req *IdemAbandonRequest) (dup bool, err error)
	IdemGet(ctx context.Context, key string) (leasehold.IdemRecord, bool, error)
	IdemList(ctx context.Context, prefix, after string, limit int) ([]leasehold.IdemRecord, error)
}

// Queues are the keyed queues (queues.go).
type Queues interface {
	QueueCreate(ctx context.Context, req *QueueCreateRequest) (QueueCreated, error)
	QueueSend(ctx context.Context, req *QueueSendRequest) ([]leasehold.Sent, error)
	QueueReceive(ctx context.Context, req *QueueReceiveRequest) (Received, error)
	QueueAck(ctx context.Context, req *QueueAckRequest) (Acked, error)
	// QueueAckBatch acks every one of reqs in one log entry, each
	// answered on its own (Acked.Err).
	QueueAckBatch(ctx context.Context, reqs []*QueueAckRequest) ([]Acked, error)
	QueueNack(ctx context.Context, req *QueueNackRequest) error
	QueueExtend(ctx context.Context, req *QueueExtendRequest) error
	QueueRedrive(ctx context.Context, req *QueueRedriveRequest) (QueueMoved, error)
	QueuePurge(ctx context.Context, req *QueuePurgeRequest) (QueueMoved, error)
	QueueDelete(ctx context.Context, req *QueueDeleteRequest) error
	QueueGet(ctx context.Context, name string, inFlight int) (leasehold.QueueInfo, []leasehold.Delivery, bool, error)
	QueueList(ctx context.Context, prefix, after string, limit int) ([]leasehold.QueueInfo, error)
	QueueDeadLetters(ctx context.Context, name string, limit int) ([]leasehold.DeadLetter, bool, error)
}

// Groups are the partition groups (groups.go).
type Groups interface {
	GroupCreate(ctx context.Context, req *GroupCreateRequest) (*leasehold.GroupInfo, error)
	GroupGrow(ctx context.Context, req *GroupGrowRequest) (*leasehold.GroupInfo, error)
	GroupDelete(ctx context.Context, req *GroupDeleteRequest) error
	GroupJoin(ctx context.Context, req *GroupJoinRequest) (Joined, error)
	GroupLeave(ctx context.Context, req *GroupLeaveRequest) error
	GroupAckRevocation(ctx context.Context, req *GroupAckRevocationRequest) error
	Group(ctx context.Context, name string) (leasehold.GroupDetail, map[uint64]time.Duration, bool, error)
	Groups(ctx context.Context, prefix string) ([]leasehold.GroupInfo, error)
	Assignments(ctx context.Context, group, member string, lease uint64, from uint64, resume bool) (AssignmentWatch, error)
}

// Barriers are the barriers and latches (barriers.go).
type Barriers interface {
	BarrierCreate(ctx context.Context, req BarrierCreateRequest) (BarrierAnswer, error)
	BarrierArrive(ctx context.Context, req BarrierArriveRequest) (BarrierAnswer, error)
	BarrierCountDown(ctx context.Context, req BarrierCountDownRequest) (BarrierAnswer, error)
	BarrierWait(ctx context.Context, name string, phase uint64, wait time.Duration) (BarrierAnswer, error)
	BarrierReset(ctx context.Context, req BarrierNameRequest) (BarrierAnswer, error)
	BarrierDelete(ctx context.Context, req BarrierNameRequest) error
	BarrierGet(ctx context.Context, name string) (Barrier, bool, error)
	BarrierList(ctx context.Context, prefix, after string, limit int) ([]Barrier, error)
}

// API is every primitive's service: what the API front calls.
type API interface {
	Leases
	Admin
	KV
	Cluster
	Elections
	Watches
	Idempotency
	Queues
	Groups
	Barriers
}

var _ API = (*Service)(nil)

// LeaderOf says whether err is a method's refusal because this node does
// not lead, and where the leader's raft listener is when one is known:
// the API front forwards the request there.
func LeaderOf(err error) (raftAddr string, ok bool) {
	var nl *cluster.NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderAddr == "" {
		return "", false
	}
	return nl.LeaderAddr, true
}

// NotLeader is the error a method returns on a node that does not lead,
// naming the leader (its id and raft address, "" if none is known): for
// fakes of the service in the front's tests.
func NotLeader(leaderID, leaderRaftAddr string) error {
	return &cluster.NotLeaderError{LeaderID: leaderID, LeaderAddr: leaderRaftAddr}
}
