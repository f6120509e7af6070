package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// TestBarrierArriveWaitTrip runs a cyclic barrier through its handlers on
// a real node: a Wait long-polls until the last party arrives, the trip
// names its phase and token, the parties' leases end with it, and a retry
// of the tripping arrival (the same request id and secret) is told of
// that trip instead of arriving in the next phase.
func TestBarrierArriveWaitTrip(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewBarriersClient(httpClient(t), n.URL)
	leases := newClient(t, n)
	if _, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.BarriersCreateRequest{Name: "jobs/phase1",
		Kind: pb.BarrierKind_BARRIER_KIND_CYCLIC, Parties: 2})); err != nil {
		t.Fatal(err)
	}
	first, err := c.Arrive(ctxFor(t, callTimeout), connect.NewRequest(&pb.BarriersArriveRequest{Name: "jobs/phase1",
		Participant: "w1", Ttl: dur(30 * time.Second)}))
	if err != nil || first.Msg.Phase != 1 || first.Msg.Lease == nil || first.Msg.End != nil || first.Msg.Barrier.Arrived != 1 {
		t.Fatalf("first arrival: %v %v", first, err)
	}
	waited := make(chan *pb.BarriersWaitResponse, 1)
	go func() {
		res, err := c.Wait(ctxFor(t, 20*time.Second), connect.NewRequest(&pb.BarriersWaitRequest{Name: "jobs/phase1", Phase: 1,
			Wait: dur(15 * time.Second)}))
		if err != nil {
			t.Errorf("wait: %v", err)
			waited <- nil
			return
		}
		waited <- res.Msg
	}()
	// A Wait that may not last returns at once with ended false.
	if res, err := c.Wait(ctxFor(t, callTimeout), connect.NewRequest(&pb.BarriersWaitRequest{Name: "jobs/phase1"})); err != nil ||
		res.Msg.Ended || res.Msg.Phase != 1 {
		t.Fatalf("a wait of 0: %v %v", res, err)
	}
	select {
	case w := <-waited:
		t.Fatalf("the wait ended before the second party arrived: %v", w)
	case <-time.After(300 * time.Millisecond):
	}
	secret := newSecret(t)
	arrive := &pb.BarriersArriveRequest{Name: "jobs/phase1", Participant: "w2", Ttl: dur(30 * time.Second), Secret: secret, RequestId: "arrive-w2"}
	last, err := c.Arrive(ctxFor(t, callTimeout), connect.NewRequest(arrive))
	if err != nil || last.Msg.End == nil || last.Msg.End.Outcome != pb.PhaseOutcome_PHASE_OUTCOME_TRIPPED || last.Msg.Lease != nil ||
		last.Msg.End.Token <= first.Msg.Lease.Token || last.Msg.Barrier.Phase != 2 {
		t.Fatalf("the last arrival: %v %v", last, err)
	}
	w := <-waited
	if w == nil || !w.Ended || w.End.Token != last.Msg.End.Token || w.Phase != 1 {
		t.Fatalf("the wait answered %v; want the trip of phase 1 with token %d", w, last.Msg.End.Token)
	}
	// The first party's lease ended with the trip.
	if _, err := renew(leases, first.Msg.Lease.Id, first.Msg.Secret); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("renew an arrival after the trip: %v, want not found", err)
	}
	// The retry of the tripping arrival is told of the trip; nobody arrived at phase 2.
	again, err := c.Arrive(ctxFor(t, callTimeout), connect.NewRequest(arrive))
	if err != nil || again.Msg.Phase != 1 || again.Msg.End == nil || again.Msg.End.Token != last.Msg.End.Token || again.Msg.Barrier.Arrived != 0 {
		t.Fatalf("a retry of the tripping arrival: %v %v", again, err)
	}
	got, err := c.Get(ctxFor(t, callTimeout), connect.NewRequest(&pb.BarriersGetRequest{Name: "jobs/phase1"}))
	if err != nil || got.Msg.Barrier.Phase != 2 || got.Msg.Barrier.Arrived != 0 || len(got.Msg.Barrier.Ends) != 1 || got.Msg.Barrier.Trips != 1 {
		t.Fatalf("get after the trip: %v %v", got, err)
	}
}

// TestBarrierWaitLeftEarlyChangesNothing: a waiter that leaves (its
// context ends) is answered canceled and leaves the barrier as it was; a
// party whose arrival is released before the trip is no longer counted.
func TestBarrierWaitLeftEarlyChangesNothing(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewBarriersClient(httpClient(t), n.URL)
	leases := newClient(t, n)
	if _, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.BarriersCreateRequest{Name: "b", Kind: pb.BarrierKind_BARRIER_KIND_CYCLIC,
		Parties: 3, Timeout: dur(time.Minute)})); err != nil {
		t.Fatal(err)
	}
	a, err := c.Arrive(ctxFor(t, callTimeout), connect.NewRequest(&pb.BarriersArriveRequest{Name: "b", Participant: "w1"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(ctx, connect.NewRequest(&pb.BarriersWaitRequest{Name: "b", Wait: dur(time.Minute)})); err == nil {
		t.Fatal("a wait whose caller left answered success")
	}
	if err := release(leases, a.Msg.Lease.Id, a.Msg.Secret); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctxFor(t, callTimeout), connect.NewRequest(&pb.BarriersGetRequest{Name: "b"}))
	if err != nil || got.Msg.Barrier.Arrived != 0 || got.Msg.Barrier.Phase != 1 || len(got.Msg.Barrier.Ends) != 0 {
		t.Fatalf("after the waiter left and the party released its arrival: %v %v", got, err)
	}
}

// TestBarrierLatchAndValidation counts a latch down to its trip (a
// retried count-down counts once), and refuses bad input with its code,
// naming the limit.
func TestBarrierLatchAndValidation(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewBarriersClient(httpClient(t), n.URL)
	ctx := ctxFor(t, callTimeout)
	if _, err := c.Create(ctx, connect.NewRequest(&pb.BarriersCreateRequest{Name: "l", Kind: pb.BarrierKind_BARRIER_KIND_LATCH, Parties: 3})); err != nil {
		t.Fatal(err)
	}
	down := &pb.BarriersCountDownRequest{Name: "l", Count: 2, RequestId: "cd-1"}
	for range 2 { // the second is a retry: it counts once
		res, err := c.CountDown(ctx, connect.NewRequest(down))
		if err != nil || res.Msg.Barrier.Arrived != 2 || res.Msg.End != nil {
			t.Fatalf("count down 2 of 3: %v %v", res, err)
		}
	}
	res, err := c.CountDown(ctx, connect.NewRequest(&pb.BarriersCountDownRequest{Name: "l"}))
	if err != nil || res.Msg.End == nil || res.Msg.End.Outcome != pb.PhaseOutcome_PHASE_OUTCOME_TRIPPED || !res.Msg.Barrier.Tripped {
		t.Fatalf("the last count-down: %v %v", res, err)
	}
	for _, tc := range []struct {
		name string
		call func() error
		code connect.Code
		msg  string
	}{
		{"no parties", func() error {
			_, err := c.Create(ctx, connect.NewRequest(&pb.BarriersCreateRequest{Name: "x", Kind: pb.BarrierKind_BARRIER_KIND_LATCH}))
			return err
		}, connect.CodeInvalidArgument, "max_barrier_parties"},
		{"too many parties", func() error {
			_, err := c.Create(ctx, connect.NewRequest(&pb.BarriersCreateRequest{Name: "x", Kind: pb.BarrierKind_BARRIER_KIND_LATCH, Parties: 10001}))
			return err
		}, connect.CodeInvalidArgument, "max_barrier_parties"},
		{"no kind", func() error {
			_, err := c.Create(ctx, connect.NewRequest(&pb.BarriersCreateRequest{Name: "x", Parties: 2}))
			return err
		}, connect.CodeInvalidArgument, "kind"},
		{"reserved name", func() error {
			_, err := c.Create(ctx, connect.NewRequest(&pb.BarriersCreateRequest{Name: "@leasehold/x", Kind: pb.BarrierKind_BARRIER_KIND_LATCH, Parties: 2}))
			return err
		}, connect.CodeInvalidArgument, "@leasehold/"},
		{"short timeout", func() error {
			_, err := c.Create(ctx, connect.NewRequest(&pb.BarriersCreateRequest{Name: "x", Kind: pb.BarrierKind_BARRIER_KIND_LATCH, Parties: 2,
				Timeout: dur(time.Millisecond)}))
			return err
		}, connect.CodeInvalidArgument, "timeout"},
		{"unlike create", func() error {
			_, err := c.Create(ctx, connect.NewRequest(&pb.BarriersCreateRequest{Name: "l", Kind: pb.BarrierKind_BARRIER_KIND_LATCH, Parties: 4}))
			return err
		}, connect.CodeAlreadyExists, "already exists"},
		{"arrive at a latch", func() error {
			_, err := c.Arrive(ctx, connect.NewRequest(&pb.BarriersArriveRequest{Name: "l", Participant: "p"}))
			return err
		}, connect.CodeFailedPrecondition, "latch"},
		{"no participant", func() error {
			_, err := c.Arrive(ctx, connect.NewRequest(&pb.BarriersArriveRequest{Name: "l"}))
			return err
		}, connect.CodeInvalidArgument, "participant"},
		{"request id without a secret", func() error {
			_, err := c.Arrive(ctx, connect.NewRequest(&pb.BarriersArriveRequest{Name: "l", Participant: "p", RequestId: "r"}))
			return err
		}, connect.CodeInvalidArgument, "secret"},
		{"count in an ended phase", func() error {
			if _, err := c.Reset(ctx, connect.NewRequest(&pb.BarriersResetRequest{Name: "l"})); err != nil {
				return err
			}
			_, err := c.CountDown(ctx, connect.NewRequest(&pb.BarriersCountDownRequest{Name: "l", Phase: 1}))
			return err
		}, connect.CodeAborted, "tripped"},
		{"wait too long", func() error {
			_, err := c.Wait(ctx, connect.NewRequest(&pb.BarriersWaitRequest{Name: "l", Wait: dur(2 * time.Hour)}))
			return err
		}, connect.CodeInvalidArgument, "wait"},
		{"wait for a phase not begun", func() error {
			_, err := c.Wait(ctx, connect.NewRequest(&pb.BarriersWaitRequest{Name: "l", Phase: 9}))
			return err
		}, connect.CodeInvalidArgument, "not begun"},
		{"no such barrier", func() error {
			_, err := c.Get(ctx, connect.NewRequest(&pb.BarriersGetRequest{Name: "nope"}))
			return err
		}, connect.CodeNotFound, "nope"},
	} {
		err := tc.call()
		if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v naming %q", tc.name, err, tc.code, tc.msg)
		}
	}
	if _, err := c.Delete(ctx, connect.NewRequest(&pb.BarriersDeleteRequest{Name: "l"})); err != nil {
		t.Fatal(err)
	}
	if list, err := c.List(ctx, connect.NewRequest(&pb.BarriersListRequest{})); err != nil || len(list.Msg.Barriers) != 0 {
		t.Fatalf("list after the delete: %v %v", list, err)
	}
}

// A stuck party is forced out like any lease (docs/barriers.md): a forced
// release of its arrival's resource, as Leases.List shows it, withdraws
// it, and the phase counts one party fewer. With a long barrier name that
// resource is longer than a caller's resource may be, and was refused.
func TestForceReleaseOfABarrierParty(t *testing.T) {
	name := "jobs/" + strings.Repeat("n", 240)
	n := startNode(t)
	hc := httpClient(t)
	c := leaseholdv1connect.NewBarriersClient(hc, n.URL)
	if _, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.BarriersCreateRequest{Name: name,
		Kind: pb.BarrierKind_BARRIER_KIND_CYCLIC, Parties: 3})); err != nil {
		t.Fatal(err)
	}
	stuck, err := c.Arrive(ctxFor(t, callTimeout), connect.NewRequest(&pb.BarriersArriveRequest{Name: name,
		Participant: "stuck-worker", Ttl: dur(time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	list, err := newClient(t, n).List(ctxFor(t, callTimeout), connect.NewRequest(&pb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var resource string
	for _, l := range list.Msg.Leases {
		if l.Id == stuck.Msg.Lease.Id {
			resource = l.Resources[0]
		}
	}
	if resource == "" {
		t.Fatalf("the arrival's lease %d is not listed: %v", stuck.Msg.Lease.Id, list.Msg.Leases)
	}
	admin := leaseholdv1connect.NewAdminClient(hc, n.URL)
	if _, err := admin.ForceRelease(ctxFor(t, callTimeout), connect.NewRequest(&pb.ForceReleaseRequest{Resource: resource,
		LeaseId: stuck.Msg.Lease.Id, Reason: "stuck party"})); err != nil {
		t.Fatalf("force release of the arrival %q: %v", resource, err)
	}
	got, err := c.Get(ctxFor(t, callTimeout), connect.NewRequest(&pb.BarriersGetRequest{Name: name}))
	if err != nil || got.Msg.Barrier.Arrived != 0 || got.Msg.Barrier.Phase != 1 {
		t.Fatalf("after forcing the party out: %v %v; want phase 1 with nobody arrived", got, err)
	}
}
