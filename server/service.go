package server

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// Service is what the handlers call: a node's primitives (implemented by
// *service.Service). Handler tests may give a fake (Config.Service) where
// the handler's own work (validation, authorization, conversion) is what
// they test.
type Service interface {
	Acquire(ctx context.Context, cmd service.Ask) (service.Result, error)
	Renew(ctx context.Context, cmd *service.Renew) (service.Result, error)
	Release(ctx context.Context, cmd *service.Release) (service.Result, error)
	Batch(ctx context.Context, cmds []service.Command) ([]service.Result, error)
	// LeftEarly and HoldPlace settle the acquires of a Batch whose
	// caller left, or that queued.
	LeftEarly(ctx context.Context, cmds ...*service.Acquire) error
	HoldPlace(cmd *service.Acquire)
	Holding(ctx context.Context, resource string) (service.Holding, error)
	List(ctx context.Context, after uint64, limit int, prefix string) ([]service.Held, bool, error)

	Lock(ctx context.Context, resource string) (service.Lock, error)
	Locks(ctx context.Context, after uint64, limit int, prefix string) ([]service.Lock, uint64, error)
	ForceRelease(ctx context.Context, cmd *service.ForceRelease) (service.Result, error)
	Audit(ctx context.Context, since time.Duration, limit int) ([]service.AuditRecord, bool, error)
	Backup() service.Backup

	Put(ctx context.Context, cmd *service.Put) (uint64, error)
	PutBound(ctx context.Context, cmd *service.Put, lease service.LeaseProof) (uint64, error)
	Delete(ctx context.Context, cmd *service.Delete) (uint64, error)
	Txn(ctx context.Context, cmd *service.Txn) (*service.TxnResult, uint64, error)
	Get(ctx context.Context, key string) (service.Item, error)
	ListKeys(ctx context.Context, prefix, after string, limit int) ([]service.KeyItem, bool, error)
	CheckFence(ctx context.Context, f leasehold.Fence) error

	Members(ctx context.Context) ([]service.Member, error)
	AddVoter(ctx context.Context, id, raftAddr string) error
	RemoveServer(ctx context.Context, id string) error
	TransferLeader(ctx context.Context, id string) error
	LocalStatus() service.NodeStatus
	// Status asks the other members through ask.
	Status(ctx context.Context, ask service.AskStatus) ([]service.MemberStatus, error)
	Campaign(ctx context.Context, cmd *service.Campaign) (service.Result, error)
	Proclaim(ctx context.Context, cmd *service.Proclaim) (service.Result, error)
	Resign(ctx context.Context, cmd *service.Release) (service.Result, error)
	Leader(ctx context.Context, name string) (service.Election, time.Duration, bool, error)
	Elections(ctx context.Context, prefix, after string, limit int) ([]service.Election, bool, error)
	Observe(ctx context.Context, name string, from uint64, resume bool) (service.Observation, error)
	Watch(ctx context.Context, req service.WatchRequest) (*service.Watcher, error)
}

var _ Service = (*service.Service)(nil)
