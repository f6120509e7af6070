package server

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

func durPB(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func timePB(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// leasePB converts a lease for the wire. expiresIn < 0 means unknown here.
func leasePB(l *leasehold.Lease, expiresIn time.Duration) *pb.Lease {
	if l == nil {
		return nil
	}
	out := &pb.Lease{
		Id:         l.ID,
		Token:      l.Token,
		Resources:  l.Resources,
		Owner:      l.Owner,
		Operation:  l.Operation,
		Ttl:        durPB(l.TTL),
		LockDelay:  durPB(l.LockDelay),
		MaxHold:    durPB(l.MaxHold),
		Metadata:   l.Metadata,
		AcquiredAt: timePB(l.AcquiredAt),
		RenewedAt:  timePB(l.RenewedAt),
		RenewCount: l.RenewCount,
		Progress:   l.Progress,
		Semaphore:  l.Semaphore,
		Limit:      uint32(l.Limit),
	}
	if expiresIn >= 0 {
		out.ExpiresIn = durationpb.New(expiresIn)
	}
	return out
}

func waiterPB(w leasehold.Waiter) *pb.Waiter {
	return &pb.Waiter{
		Resources: w.Resources,
		Owner:     w.Owner,
		Operation: w.Operation,
		Wait:      durPB(w.Wait),
		QueuedAt:  timePB(w.QueuedAt),
	}
}
