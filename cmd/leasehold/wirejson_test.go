package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/leasehold/leasehold"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestJSONOutputIsTheAPIsMessage: what --json prints (status, list, locks,
// locks show, audit, cluster members, cluster status) is the message the
// API answers, field for field. The client hands out plain Go types;
// wirejson.go puts them back, and must set exactly the fields the server
// set (a free holder, an unknown countdown, an unset duration). Against a
// real node with a held multi-resource lease with metadata, progress and
// a max hold, a waiter, a resource in lock-delay and a forced release.
// Countdowns and ages move between two reads, so they are compared by
// presence only.
func TestJSONOutputIsTheAPIsMessage(t *testing.T) {
	t.Parallel()
	n := testcluster.StartNode(t, "")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	c, err := client.New(client.Config{Endpoints: []string{n.URL}, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	leases := leaseholdv1connect.NewLeasesClient(hc, n.URL)
	admin := leaseholdv1connect.NewAdminClient(hc, n.URL)
	cluster := leaseholdv1connect.NewClusterClient(hc, n.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	held, err := c.AcquireMany(ctx, []string{"wj/a", "wj/b"}, client.TTL(time.Minute), client.Owner("w1"),
		client.Operation("export"), client.Metadata(map[string]string{"shard": "7"}), client.MaxHold(time.Hour),
		client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	held.Progress("rows 1-1000")
	if err := held.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	waitCtx, stopWaiting := context.WithCancel(ctx)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		if l, err := c.Acquire(waitCtx, "wj/a", client.Wait(time.Minute), client.Owner("w2")); err == nil {
			l.Release(context.WithoutCancel(ctx))
		}
	}()
	defer func() { stopWaiting(); <-waited; held.Release(context.WithoutCancel(ctx)) }()
	if _, err := c.Acquire(ctx, "wj/d", client.TTL(100*time.Millisecond), client.LockDelay(time.Minute), client.ManualRenew()); err != nil {
		t.Fatal(err)
	}
	victim, err := c.Acquire(ctx, "wj/f", client.TTL(time.Minute), client.ManualRenew(), client.Owner("victim"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ForceRelease(ctx, "wj/f", victim.ID(), "ticket OPS-1"); err != nil {
		t.Fatal(err)
	}
	// The waiter queues and wj/d's lease expires into lock-delay.
	for deadline := time.Now().Add(10 * time.Second); ; {
		r, err := c.Get(ctx, "wj/a")
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Get(ctx, "wj/d")
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Waiters) == 1 && d.LockDelay != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 10s: %d waiters on wj/a (want 1), wj/d lock-delay %v (want some)", len(r.Waiters), d.LockDelay)
		}
		time.Sleep(20 * time.Millisecond)
	}

	same := func(what string, api, printed proto.Message) {
		t.Helper()
		if a, p := steady(api), steady(printed); !proto.Equal(a, p) {
			t.Errorf("%s: --json differs from the API's answer\nAPI:\n%s\nprinted:\n%s", what, prototext.Format(a), prototext.Format(p))
		}
	}
	for _, res := range []string{"wj/a", "wj/d", "wj/free"} {
		api, err := leases.Get(ctx, connect.NewRequest(&pb.GetRequest{Resource: res}))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Get(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		same("status "+res, api.Msg, resourceWire(got))

		apiLock, err := admin.Locks(ctx, connect.NewRequest(&pb.LocksRequest{Resource: res}))
		if err != nil {
			t.Fatal(err)
		}
		gotLock, err := lockOf(ctx, c, res)
		if err != nil {
			t.Fatal(err)
		}
		same("locks show "+res, apiLock.Msg.Locks[0], lockWire(gotLock))
	}

	apiList, err := leases.List(ctx, connect.NewRequest(&pb.ListRequest{PageSize: leasehold.MaxListLimit}))
	if err != nil {
		t.Fatal(err)
	}
	all, err := listAll(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	same("list", apiList.Msg, &pb.ListResponse{Leases: leasesWire(all)})

	apiLocks, err := admin.Locks(ctx, connect.NewRequest(&pb.LocksRequest{PageSize: leasehold.MaxListLimit}))
	if err != nil {
		t.Fatal(err)
	}
	locks, err := c.Locks(ctx, client.LocksQuery{})
	if err != nil {
		t.Fatal(err)
	}
	same("locks", apiLocks.Msg, locksWire(locks))

	apiAudit, err := admin.Audit(ctx, connect.NewRequest(&pb.AuditRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	recs, truncated, err := c.Audit(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	same("audit", apiAudit.Msg, auditWire(recs, truncated))

	apiMembers, err := cluster.Members(ctx, connect.NewRequest(&pb.MembersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	members, err := c.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	same("cluster members", apiMembers.Msg, membersWire(members))

	apiStatus, err := cluster.Status(ctx, connect.NewRequest(&pb.StatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	status, err := c.ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	same("cluster status", apiStatus.Msg, statusWire(status))
}

// moving are the fields that change between two reads: compared by
// presence only.
var moving = map[protoreflect.Name]bool{
	"expires_in": true, "held_for": true, "oldest_wait": true, "waiting": true, "last_contact": true,
}

// steady is a copy of m with every moving duration that is set set to 1s.
func steady(m proto.Message) proto.Message {
	m = proto.Clone(m)
	var walk func(protoreflect.Message)
	walk = func(m protoreflect.Message) {
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case moving[fd.Name()]:
				m.Set(fd, protoreflect.ValueOfMessage(durationpb.New(time.Second).ProtoReflect()))
			case fd.IsList() && fd.Message() != nil:
				for i := range v.List().Len() {
					walk(v.List().Get(i).Message())
				}
			case fd.Message() != nil && !fd.IsMap():
				walk(v.Message())
			}
			return true
		})
	}
	walk(m.ProtoReflect())
	return m
}
