package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
	"github.com/leasehold/leasehold/service"
)

// fakeLeases answers the lease handlers with set values and records what
// reached it; methods it does not set panic (the embedded nil interface),
// so a handler that calls something unexpected fails the test.
type fakeLeases struct {
	server.Service
	mu       sync.Mutex
	acquires []fsm.Acquire
	holding  service.Holding
	page     []service.Held
}

func (f *fakeLeases) Acquire(_ context.Context, ask fsm.Ask) (fsm.Result, error) {
	cmd := ask.Base()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acquires = append(f.acquires, *cmd)
	l := &leasehold.Lease{ID: 7, Token: 42, Resources: cmd.Resources, Owner: cmd.Owner, TTL: cmd.TTL}
	return fsm.Result{Lease: l, Remaining: cmd.TTL}, nil
}

func (f *fakeLeases) Holding(context.Context, string) (service.Holding, error) { return f.holding, nil }

func (f *fakeLeases) List(context.Context, uint64, int, string) ([]service.Held, bool, error) {
	return f.page, true, nil
}

func fakeNode(t *testing.T, f *fakeLeases) leaseholdv1connect.LeasesClient {
	t.Helper()
	return newClient(t, testcluster.StartServerNode(t, func(c *server.Config) { c.Service = f }))
}

// The Acquire handler validates before it calls the service, and
// converts the service's grant (lease, secret, remaining time) for the
// wire.
func TestHandlerAcquireWithFakeService(t *testing.T) {
	t.Parallel()
	f := &fakeLeases{}
	c := fakeNode(t, f)
	ctx := t.Context()
	_, err := c.Acquire(ctx, connect.NewRequest(&pb.AcquireRequest{Resources: []string{"r"}, Owner: "o", Ttl: durationpb.New(time.Millisecond)}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("acquire with a 1ms ttl: %v, want InvalidArgument", err)
	}
	f.mu.Lock()
	if len(f.acquires) != 0 {
		t.Fatalf("an invalid acquire reached the service: %+v", f.acquires)
	}
	f.mu.Unlock()
	res, err := c.Acquire(ctx, connect.NewRequest(&pb.AcquireRequest{Resources: []string{"r"}, Owner: "o", Ttl: durationpb.New(time.Minute)}))
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.acquires) != 1 {
		t.Fatalf("%d acquires reached the service, want 1", len(f.acquires))
	}
	got := f.acquires[0]
	if got.RequestID == "" || got.Attempt == "" || got.TTL != time.Minute || got.Owner != "o" {
		t.Errorf("the service got %+v: want a request ID and attempt made by the handler, ttl 1m, owner o", got)
	}
	l := res.Msg.Lease
	if l.GetId() != 7 || l.GetToken() != 42 || res.Msg.ExpiresIn.AsDuration() != time.Minute || len(res.Msg.Secret) != 2*leasehold.SecretBytes {
		t.Errorf("answer %v: want lease 7, token 42, expires in 1m and the secret the handler made", res.Msg)
	}
}

// Get and List convert what the service read: holder and its time left,
// line, lock delay; a next page token from the last lease when there is
// more.
func TestHandlerReadsWithFakeService(t *testing.T) {
	t.Parallel()
	holder := &leasehold.Lease{ID: 3, Token: 9, Resources: []string{"r"}, Owner: "h"}
	f := &fakeLeases{
		holding: service.Holding{Holder: holder, ExpiresIn: 7 * time.Second, LockDelay: 2 * time.Second,
			Waiters: []service.Waiter{{Resources: []string{"r"}, Owner: "w", Wait: time.Minute}}},
		page: []service.Held{{Lease: *holder, ExpiresIn: -1}, {Lease: leasehold.Lease{ID: 5, Resources: []string{"s"}}, ExpiresIn: time.Second}},
	}
	c := fakeNode(t, f)
	got, err := c.Get(t.Context(), connect.NewRequest(&pb.GetRequest{Resource: "r"}))
	if err != nil {
		t.Fatal(err)
	}
	m := got.Msg
	if m.Holder.GetId() != 3 || m.Holder.ExpiresIn.AsDuration() != 7*time.Second || m.LockDelay.AsDuration() != 2*time.Second ||
		len(m.Waiters) != 1 || m.Waiters[0].Owner != "w" || m.Waiters[0].Wait.AsDuration() != time.Minute {
		t.Errorf("Get answered %v", m)
	}
	list, err := c.List(t.Context(), connect.NewRequest(&pb.ListRequest{PageSize: 2}))
	if err != nil {
		t.Fatal(err)
	}
	if ls := list.Msg.Leases; len(ls) != 2 || ls[0].ExpiresIn != nil || ls[1].ExpiresIn.AsDuration() != time.Second || list.Msg.NextPageToken != "5" {
		t.Errorf("List answered %v: want 2 leases (the first's time left unknown) and next page token 5", list.Msg)
	}
}

// blockingKV holds a Put until its request ends.
type blockingKV struct {
	server.Service
	called chan struct{}
}

func (b *blockingKV) Put(ctx context.Context, _ *service.Put) (uint64, error) {
	close(b.called)
	<-ctx.Done()
	return 0, ctx.Err()
}

// A request the node's shutdown cuts off (its handler returns the plain
// context error) answers Unavailable, so the caller retries elsewhere,
// not Canceled, which would blame the caller.
func TestShutdownCutRequestIsUnavailable(t *testing.T) {
	t.Parallel()
	f := &blockingKV{called: make(chan struct{})}
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.Service = f })
	kv := leaseholdv1connect.NewKVClient(httpClient(t), n.URL)
	done := make(chan error, 1)
	go func() {
		_, err := kv.Put(t.Context(), connect.NewRequest(&pb.PutRequest{Key: "k", Value: []byte("v")}))
		done <- err
	}()
	select {
	case <-f.called:
	case <-time.After(20 * time.Second):
		t.Fatal("the Put never reached the service")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go n.Server.Shutdown(ctx) // cancels requests in flight after its grace
	select {
	case err := <-done:
		if connect.CodeOf(err) != connect.CodeUnavailable {
			t.Errorf("Put cut by shutdown: %v, want Unavailable", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the Put outlived the shutdown")
	}
}
