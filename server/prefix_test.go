package server_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// The hole as found: an operator limited to a/ read b/private from KV and
// listed b/ leases. Now it reads and lists a/ only, a lease it may see
// shows only its a/ resources (in Get, List, Locks and watches), the
// audit log only the records of a/, and it may not ask for a snapshot.
func TestPrefixedOperatorSeesOnlyItsPrefixes(t *testing.T) {
	t.Parallel()
	n := prefixNode(t)
	root, op := withToken(rootToken), withToken(prefixed[1].token)
	kvRoot, kvOp := leaseholdv1connect.NewKVClient(httpClient(t), n.URL, root), leaseholdv1connect.NewKVClient(httpClient(t), n.URL, op)
	lsRoot, lsOp := newClient(t, n, root), newClient(t, n, op)
	admRoot, admOp := adminClient(t, n, root), adminClient(t, n, op)

	for _, k := range []string{"a/mine", "b/private"} {
		if err := kvPut(kvRoot, k, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err := kvGet(kvOp, "b/private")
	wantCode(t, err, connect.CodePermissionDenied, `"b/private"`, `"oa"`)
	if g, err := kvGet(kvOp, "a/mine"); err != nil || string(g.Value) != "v" {
		t.Fatalf("operator reading a/mine: %v %v", g, err)
	}
	_, err = kvList(kvOp, &pb.KVListRequest{Prefix: ""})
	wantCode(t, err, connect.CodePermissionDenied, `"a/"`)

	// A lease across both tenants, as an unlimited token may take, one on
	// b/ alone, and a forced release in each.
	both := mustAcquire(t, lsRoot, &pb.AcquireRequest{Resources: []string{"a/x", "b/y"}, Ttl: dur(time.Minute)})
	mustAcquire(t, lsRoot, &pb.AcquireRequest{Resources: []string{"b/job"}, Ttl: dur(time.Minute)})
	for _, r := range []string{"a/forced", "b/forced"} {
		l := mustAcquire(t, lsRoot, &pb.AcquireRequest{Resources: []string{r}, Ttl: dur(time.Minute)})
		if _, err := forceRelease(admRoot, &pb.ForceReleaseRequest{Resource: r, LeaseId: l.Lease.Id, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	for _, prefix := range []string{"b/", ""} {
		_, err := lsOp.List(ctx, connect.NewRequest(&pb.ListRequest{Prefix: prefix}))
		wantCode(t, err, connect.CodePermissionDenied, "not under them")
		_, err = admOp.Locks(ctx, connect.NewRequest(&pb.LocksRequest{Prefix: prefix}))
		wantCode(t, err, connect.CodePermissionDenied, "not under them")
	}
	list, err := lsOp.List(ctx, connect.NewRequest(&pb.ListRequest{Prefix: "a/"}))
	if err != nil || len(list.Msg.Leases) != 1 || !slices.Equal(list.Msg.Leases[0].Resources, []string{"a/x"}) {
		t.Fatalf("operator listing a/: %v %v, want lease %d showing a/x alone", list, err, both.Lease.Id)
	}
	if h := get(t, lsOp, "a/x").Holder; h.GetId() != both.Lease.Id || !slices.Equal(h.Resources, []string{"a/x"}) {
		t.Fatalf("operator getting a/x: holder %v, want lease %d showing a/x alone", h, both.Lease.Id)
	}
	if l := lockOf(t, admOp, "a/x"); !slices.Equal(l.LeaseResources, []string{"a/x"}) {
		t.Fatalf("operator's lock of a/x: lease resources %q, want a/x alone", l.LeaseResources)
	}
	if ls := locks(t, admOp, &pb.LocksRequest{Prefix: "a/"}).Locks; len(ls) != 1 || !slices.Equal(ls[0].LeaseResources, []string{"a/x"}) {
		t.Fatalf("operator's locks under a/: %v", ls)
	}

	recs := auditLog(t, admOp, &pb.AuditRequest{}).Records
	if len(recs) != 1 || recs[0].Resource != "a/forced" {
		t.Fatalf("operator's audit log: %v, want the record of a/forced alone", recs)
	}
	if recs := auditLog(t, admRoot, &pb.AuditRequest{}).Records; len(recs) != 2 {
		t.Fatalf("unlimited admin's audit log: %v, want both records", recs)
	}

	watch := leaseholdv1connect.NewWatchClient(h2cClient(t), n.URL)
	from := uint64(0)
	req := connect.NewRequest(&pb.WatchRequest{Prefixes: []string{"a/x"}, FromIndex: &from})
	req.Header().Set("Authorization", "Bearer "+prefixed[1].token)
	s, err := watch.Watch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for s.Receive() {
		if evs := s.Msg().Events; len(evs) > 0 {
			if e := evs[0]; e.LeaseId != both.Lease.Id || !slices.Equal(e.Resources, []string{"a/x"}) {
				t.Fatalf("operator's watch of a/x: %v, want lease %d granted showing a/x alone", e, both.Lease.Id)
			}
			break
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}

	snap := leaseholdv1connect.NewAdminClient(h2cClient(t), n.URL)
	sreq := connect.NewRequest(&pb.SnapshotRequest{})
	sreq.Header().Set("Authorization", "Bearer "+prefixed[2].token)
	ss, err := snap.Snapshot(ctx, sreq)
	if err == nil {
		ss.Receive()
		err = ss.Err()
		ss.Close()
	}
	wantCode(t, err, connect.CodePermissionDenied, "every tenant's data")
}
