package client

import (
	"context"
	"iter"

	"github.com/leasehold/leasehold/api/leasehold"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// WriteOption conditions a Put or Delete.
type WriteOption func(*writeOptions)

type writeOptions struct {
	ifVersion *uint64
	fence     *pb.Fence
	lease     *Lease // bind the key to it (Put only)
}

// IfVersion makes the write apply only if the key is at version v (0: the
// key must not exist); otherwise it fails with leasehold.ErrVersionMismatch.
func IfVersion(v uint64) WriteOption { return func(o *writeOptions) { o.ifVersion = &v } }

// FencedBy makes the write apply only while lease l still holds resource:
// a lost lease's write fails with leasehold.ErrStaleToken at once.
func FencedBy(l *Lease, resource string) WriteOption {
	return func(o *writeOptions) { o.fence = &pb.Fence{Resource: resource, Token: l.Token()} }
}

// BindLease binds the written key to lease l, which the caller holds: the
// key is deleted in the same log entry that ends l (release, expiry,
// forced release), like ZooKeeper's ephemeral nodes. A later write without
// BindLease unbinds the key. For Put and OpPut only.
func BindLease(l *Lease) WriteOption { return func(o *writeOptions) { o.lease = l } }

// Fence is FencedBy for a token known by number (e.g. from LEASEHOLD_TOKEN).
func Fence(resource string, token uint64) WriteOption {
	return func(o *writeOptions) { o.fence = &pb.Fence{Resource: resource, Token: token} }
}

// FencedByPartition makes the write apply only while epoch is the current
// grant of partition of group: also while the partition is being revoked
// from its owner, never after it was handed over.
func FencedByPartition(group string, partition int, epoch uint64) WriteOption {
	return func(o *writeOptions) { o.fence = partitionFence(group, partition, epoch) }
}

// FencedByDelivery makes the write apply only while the delivery with
// token of queue's key is in flight: never after its ack, nack or
// redelivery. d.Queue, d.Key and d.Token of a Delivery name it.
func FencedByDelivery(queue, key string, token uint64) WriteOption {
	return func(o *writeOptions) { o.fence = &pb.Fence{Queue: queue, Key: key, Token: token} }
}

func partitionFence(group string, partition int, epoch uint64) *pb.Fence {
	return &pb.Fence{Group: group, Partition: count(partition), Token: epoch}
}

// Put writes value at key and returns its new version.
func (c *Client) Put(ctx context.Context, key string, value []byte, opts ...WriteOption) (uint64, error) {
	var o writeOptions
	for _, f := range opts {
		f(&o)
	}
	req := &pb.PutRequest{Key: key, Value: value, IfVersion: o.ifVersion, Fence: o.fence, RequestId: randomHex(16)}
	if o.lease != nil {
		req.LeaseId, req.LeaseSecret = o.lease.ID(), o.lease.Secret()
	}
	r, err := call(ctx, c, c.cfg.RequestTimeout, kvOf, leaseholdv1connect.KVClient.Put, req)
	if err != nil {
		return 0, err
	}
	return r.Version, nil
}

// Delete removes key. A BindLease option is ignored.
func (c *Client) Delete(ctx context.Context, key string, opts ...WriteOption) error {
	var o writeOptions
	for _, f := range opts {
		f(&o)
	}
	_, err := call(ctx, c, c.cfg.RequestTimeout, kvOf, leaseholdv1connect.KVClient.Delete,
		&pb.DeleteRequest{Key: key, IfVersion: o.ifVersion, Fence: o.fence, RequestId: randomHex(16)})
	return err
}

// GetKey reads key (linearizably) and its version. A missing key is an
// error matching leasehold.ErrNotFound.
func (c *Client) GetKey(ctx context.Context, key string) (value []byte, version uint64, err error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, kvOf, leaseholdv1connect.KVClient.Get, &pb.KVGetRequest{Key: key})
	if err != nil {
		return nil, 0, err
	}
	return r.Value, r.Version, nil
}

// KeyInfo is a key as GetKeyInfo reads it.
type KeyInfo struct {
	Value   []byte
	Version uint64 // the log index of its last write
	LeaseID uint64 // the lease it is bound to (0: none); it ends with it
}

// GetKeyInfo reads key (linearizably) with its version and bound lease. A
// missing key is an error matching leasehold.ErrNotFound.
func (c *Client) GetKeyInfo(ctx context.Context, key string) (KeyInfo, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, kvOf, leaseholdv1connect.KVClient.Get, &pb.KVGetRequest{Key: key})
	if err != nil {
		return KeyInfo{}, err
	}
	return KeyInfo{Value: r.Value, Version: r.Version, LeaseID: r.LeaseId}, nil
}

// KeyEntry is a key as Keys lists it.
type KeyEntry struct {
	Key string
	KeyInfo
}

// Keys yields every key starting with prefix ("": all) in key order, with
// its version and bound lease, reading a page of up to 1000 at a time as
// the loop goes; a failed read is yielded as the error of a last pair.
// With lease-bound keys it is a list of who is alive:
//
//	for k, err := range c.Keys(ctx, "alive/api/") {
//		if err != nil {
//			return err
//		}
//		fmt.Println(k.Key, string(k.Value))
//	}
//
// Keys written or deleted while the loop runs may or may not be seen;
// none is seen twice.
func (c *Client) Keys(ctx context.Context, prefix string) iter.Seq2[KeyEntry, error] {
	return pages(func(token string) ([]KeyEntry, string, error) {
		r, err := call(ctx, c, c.cfg.RequestTimeout, kvOf, leaseholdv1connect.KVClient.List,
			&pb.KVListRequest{Prefix: prefix, PageSize: leasehold.MaxListLimit, PageToken: token})
		if err != nil {
			return nil, "", err
		}
		out := make([]KeyEntry, len(r.Items))
		for i, it := range r.Items {
			out[i] = KeyEntry{Key: it.Key, KeyInfo: KeyInfo{Value: it.Value, Version: it.Version, LeaseID: it.LeaseId}}
		}
		return out, r.NextPageToken, nil
	})
}

// CheckFence returns nil only if token belongs to the lease that holds
// resource right now; otherwise an error matching leasehold.ErrStaleToken.
// Use it before each protected write when the resource cannot check tokens
// itself and can afford one round trip.
func (c *Client) CheckFence(ctx context.Context, resource string, token uint64) error {
	_, err := call(ctx, c, c.cfg.RequestTimeout, kvOf, leaseholdv1connect.KVClient.CheckFence, &pb.CheckFenceRequest{Resource: resource, Token: token})
	return err
}

// CheckPartitionFence is CheckFence for a partition's epoch (see
// FencedByPartition).
func (c *Client) CheckPartitionFence(ctx context.Context, group string, partition int, epoch uint64) error {
	_, err := call(ctx, c, c.cfg.RequestTimeout, kvOf, leaseholdv1connect.KVClient.CheckFence,
		&pb.CheckFenceRequest{Group: group, Partition: count(partition), Token: epoch})
	return err
}

// CheckDeliveryFence is CheckFence for a queue delivery's token (see
// FencedByDelivery).
func (c *Client) CheckDeliveryFence(ctx context.Context, queue, key string, token uint64) error {
	_, err := call(ctx, c, c.cfg.RequestTimeout, kvOf, leaseholdv1connect.KVClient.CheckFence,
		&pb.CheckFenceRequest{Queue: queue, Key: key, Token: token})
	return err
}
