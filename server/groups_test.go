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

// groupOwners reads each partition's owner ("name*" while revoking).
func groupOwners(t testing.TB, c leaseholdv1connect.GroupsClient, group string) ([]string, *pb.GroupsGetResponse) {
	t.Helper()
	res, err := c.Get(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsGetRequest{Group: group}))
	if err != nil {
		t.Fatalf("get %s: %v", group, err)
	}
	out := make([]string, len(res.Msg.Partitions))
	for i, p := range res.Msg.Partitions {
		out[i] = p.Owner
		if p.Revoking {
			out[i] += "*"
		}
	}
	return out, res.Msg
}

func joinGroup(t testing.TB, c leaseholdv1connect.GroupsClient, group, member string, ttl time.Duration) *pb.GroupsJoinResponse {
	t.Helper()
	res, err := c.Join(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsJoinRequest{Group: group, Member: member, Ttl: dur(ttl),
		Metadata: map[string]string{"host": member + ".local"}}))
	if err != nil {
		t.Fatalf("join %s as %s: %v", group, member, err)
	}
	return res.Msg
}

// TestGroupsJoinAckLeave runs a group through its handlers on a real
// node: the first member gets every partition; a second one's share is
// revoked from the first and granted, with a larger epoch, only once the
// first acknowledged; a leave gives the leaver's partitions to the other
// with larger epochs again; bad input is refused with its code.
func TestGroupsJoinAckLeave(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewGroupsClient(httpClient(t), n.URL)
	if _, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "shards", Partitions: 4})); err != nil {
		t.Fatal(err)
	}
	a := joinGroup(t, c, "shards", "a", 30*time.Second)
	if len(a.Partitions) != 4 || a.Secret == "" || a.Lease.Id == 0 {
		t.Fatalf("first join: %v", a)
	}
	epochs := map[uint32]uint64{}
	for _, p := range a.Partitions {
		epochs[p.Partition] = p.Epoch
	}
	b := joinGroup(t, c, "shards", "b", 30*time.Second)
	if len(b.Partitions) != 0 {
		t.Fatalf("b got %v before a gave anything up", b.Partitions)
	}
	owners, got := groupOwners(t, c, "shards")
	if strings.Join(owners, ",") != "a,a,a*,a*" || got.Group.PendingRevocations != 2 || got.Partitions[2].NextOwner != "b" {
		t.Fatalf("after b joined: owners %q, group %v", owners, got.Group)
	}
	if m := got.Members[0]; m.Member != "a" || m.Metadata["host"] != "a.local" || len(m.Revoking) != 2 || m.ExpiresIn == nil {
		t.Fatalf("member a: %v", m)
	}
	for _, p := range []uint32{2, 3} {
		if _, err := c.AckRevocation(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsAckRevocationRequest{Group: "shards",
			Member: "a", LeaseId: a.Lease.Id, Secret: a.Secret, Partition: p, Epoch: epochs[p]})); err != nil {
			t.Fatalf("ack %d: %v", p, err)
		}
	}
	owners, got = groupOwners(t, c, "shards")
	if strings.Join(owners, ",") != "a,a,b,b" {
		t.Fatalf("after the acks: %q", owners)
	}
	for _, p := range got.Partitions[2:] {
		if p.Epoch <= epochs[p.Partition] {
			t.Fatalf("partition %d went to b with epoch %d, not above a's %d", p.Partition, p.Epoch, epochs[p.Partition])
		}
		epochs[p.Partition] = p.Epoch
	}
	_, err := c.AckRevocation(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsAckRevocationRequest{Group: "shards",
		Member: "b", LeaseId: b.Lease.Id, Secret: b.Secret, Partition: 2, Epoch: epochs[2]}))
	wantCode(t, err, connect.CodeFailedPrecondition, "not being revoked")

	if _, err := c.Leave(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsLeaveRequest{LeaseId: b.Lease.Id, Secret: b.Secret})); err != nil {
		t.Fatal(err)
	}
	owners, got = groupOwners(t, c, "shards")
	if strings.Join(owners, ",") != "a,a,a,a" || got.Group.Rebalances < 2 {
		t.Fatalf("after b left: %q, %v", owners, got.Group)
	}
	for _, p := range got.Partitions[2:] {
		if p.Epoch <= epochs[p.Partition] {
			t.Fatalf("partition %d came back to a with epoch %d, not above b's %d", p.Partition, p.Epoch, epochs[p.Partition])
		}
	}
	// Two hand-offs after acknowledgements, two after b's leave; two
	// partitions moved to b and two back; one member left.
	m := series(scrape(t, httpClient(t), n))
	for name, want := range map[string]float64{"leasehold_group_handoff_seconds_count": 4, "leasehold_group_partitions_moved_total": 4,
		"leasehold_group_members": 1, "leasehold_group_pending_revocations": 0, "leasehold_group_revocations_lapsed_total": 0} {
		if m[name] != want {
			t.Errorf("%s = %v, want %v", name, m[name], want)
		}
	}
	if m["leasehold_group_rebalances_total"] < 2 {
		t.Errorf("leasehold_group_rebalances_total = %v, want at least 2", m["leasehold_group_rebalances_total"])
	}

	bad := []struct {
		what string
		call func() error
		code connect.Code
		says string
	}{
		{"no partitions", func() error {
			_, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "g0"}))
			return err
		}, connect.CodeInvalidArgument, "partitions"},
		{"too many partitions", func() error {
			_, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "g0", Partitions: 65537}))
			return err
		}, connect.CodeInvalidArgument, "65536"},
		{"a name with a control character", func() error {
			_, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "a\x00b", Partitions: 1}))
			return err
		}, connect.CodeInvalidArgument, "group"},
		{"the same name, other settings", func() error {
			_, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "shards", Partitions: 5}))
			return err
		}, connect.CodeAlreadyExists, "already exists"},
		{"shrinking", func() error {
			_, err := c.Grow(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsGrowRequest{Group: "shards", Partitions: 2}))
			return err
		}, connect.CodeFailedPrecondition, "never shrinks"},
		{"a tiny ttl", func() error {
			_, err := c.Join(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsJoinRequest{Group: "shards", Member: "c", Ttl: dur(time.Millisecond)}))
			return err
		}, connect.CodeInvalidArgument, "ttl"},
		{"metadata too large", func() error {
			_, err := c.Join(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsJoinRequest{Group: "shards", Member: "c",
				Metadata: map[string]string{"k": strings.Repeat("x", 5000)}}))
			return err
		}, connect.CodeInvalidArgument, "metadata"},
		{"a second session of a member", func() error {
			_, err := c.Join(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsJoinRequest{Group: "shards", Member: "a"}))
			return err
		}, connect.CodeAlreadyExists, "already has a session"},
		{"a missing group", func() error {
			_, err := c.Join(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsJoinRequest{Group: "nope", Member: "a"}))
			return err
		}, connect.CodeNotFound, "does not exist"},
		{"a stale epoch", func() error {
			_, err := c.AckRevocation(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsAckRevocationRequest{Group: "shards",
				Member: "a", LeaseId: a.Lease.Id, Secret: a.Secret, Partition: 1, Epoch: 1 << 40}))
			return err
		}, connect.CodeAborted, "epoch"},
		{"a delete without a reason", func() error {
			_, err := c.Delete(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsDeleteRequest{Group: "shards"}))
			return err
		}, connect.CodeInvalidArgument, "reason"},
	}
	for _, b := range bad {
		t.Run(b.what, func(t *testing.T) { wantCode(t, b.call(), b.code, b.says) })
	}
}

// assignmentsOf opens a member's assignment stream; its messages arrive on
// the channel, which closes when the stream ends.
func assignmentsOf(t testing.TB, url string, req *pb.GroupsAssignmentsRequest) <-chan *pb.GroupsAssignmentsResponse {
	t.Helper()
	c := leaseholdv1connect.NewGroupsClient(httpClient(t), url)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.Assignments(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("assignments: %v", err)
	}
	out := make(chan *pb.GroupsAssignmentsResponse, 100)
	go func() {
		defer close(out)
		defer stream.Close()
		for stream.Receive() {
			out <- stream.Msg()
		}
	}()
	return out
}

// nextChange is the stream's next message with changes or an end,
// skipping progress marks; it fails t after d.
func nextChange(t testing.TB, ch <-chan *pb.GroupsAssignmentsResponse, d time.Duration) *pb.GroupsAssignmentsResponse {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatal("the assignment stream ended")
			}
			if len(m.Changes) > 0 || m.Ended || m.Initial {
				return m
			}
		case <-timeout:
			t.Fatalf("no assignment change within %v", d)
		}
	}
}

func describe(m *pb.GroupsAssignmentsResponse) string {
	var b strings.Builder
	for _, c := range m.Changes {
		b.WriteString(strings.TrimPrefix(c.State.String(), "ASSIGNMENT_STATE_"))
		b.WriteString(":")
		b.WriteString(string(rune('0' + c.Partition)))
		b.WriteString(" ")
	}
	if m.Ended {
		b.WriteString("ENDED")
	}
	return strings.TrimSpace(b.String())
}

// TestGroupsAssignmentsStream: a member's stream starts with its current
// partitions and epochs, then shows each change as it is applied (a
// revocation with its bound, the removal after the acknowledgement, a
// growth's new partition), and ends when the session ends.
func TestGroupsAssignmentsStream(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewGroupsClient(httpClient(t), n.URL)
	if _, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "s", Partitions: 2,
		RevokeTimeout: dur(time.Minute)})); err != nil {
		t.Fatal(err)
	}
	a := joinGroup(t, c, "s", "a", 30*time.Second)
	stream := assignmentsOf(t, n.URL, &pb.GroupsAssignmentsRequest{Group: "s", Member: "a", LeaseId: a.Lease.Id})
	first := nextChange(t, stream, callTimeout)
	if !first.Initial || describe(first) != "ADDED:0 ADDED:1" || first.GroupPartitions != 2 || first.Index == 0 {
		t.Fatalf("first message: %v (%s)", first, describe(first))
	}
	for i, ch := range first.Changes {
		if ch.Epoch != a.Partitions[i].Epoch {
			t.Fatalf("first message epoch %d, join said %d", ch.Epoch, a.Partitions[i].Epoch)
		}
	}
	b := joinGroup(t, c, "s", "b", 30*time.Second)
	revoking := nextChange(t, stream, callTimeout)
	if describe(revoking) != "REVOKING:1" || revoking.Changes[0].RevokeWithin.AsDuration() != time.Minute || revoking.Index <= first.Index {
		t.Fatalf("after b joined: %v (%s)", revoking, describe(revoking))
	}
	bStream := assignmentsOf(t, n.URL, &pb.GroupsAssignmentsRequest{Group: "s", Member: "b", LeaseId: b.Lease.Id})
	if m := nextChange(t, bStream, callTimeout); !m.Initial || len(m.Changes) != 0 {
		t.Fatalf("b's first message: %v", m)
	}
	if _, err := c.AckRevocation(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsAckRevocationRequest{Group: "s",
		Member: "a", LeaseId: a.Lease.Id, Secret: a.Secret, Partition: 1, Epoch: revoking.Changes[0].Epoch})); err != nil {
		t.Fatal(err)
	}
	if m := nextChange(t, stream, callTimeout); describe(m) != "REMOVED:1" {
		t.Fatalf("a after its ack: %s", describe(m))
	}
	if m := nextChange(t, bStream, callTimeout); describe(m) != "ADDED:1" || m.Changes[0].Epoch <= revoking.Changes[0].Epoch {
		t.Fatalf("b after a's ack: %v", m)
	}
	if _, err := c.Grow(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsGrowRequest{Group: "s", Partitions: 3})); err != nil {
		t.Fatal(err)
	}
	if m := nextChange(t, stream, callTimeout); describe(m) != "ADDED:2" || m.GroupPartitions != 3 {
		t.Fatalf("a after the growth: %v", m)
	}
	if _, err := c.Leave(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsLeaveRequest{LeaseId: a.Lease.Id, Secret: a.Secret})); err != nil {
		t.Fatal(err)
	}
	if m := nextChange(t, stream, callTimeout); describe(m) != "REMOVED:0 REMOVED:2 ENDED" {
		t.Fatalf("a after leaving: %s", describe(m))
	}
	select {
	case _, ok := <-stream:
		if ok {
			t.Fatal("the stream went on after its session ended")
		}
	case <-time.After(callTimeout):
		t.Fatal("the stream did not close after its session ended")
	}
	// A stream of a session that is gone is NotFound.
	gone, err := leaseholdv1connect.NewGroupsClient(httpClient(t), n.URL).Assignments(ctxFor(t, callTimeout),
		connect.NewRequest(&pb.GroupsAssignmentsRequest{Group: "s", Member: "a", LeaseId: a.Lease.Id}))
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	if gone.Receive() {
		t.Fatalf("a stream of an ended session answered %v", gone.Msg())
	}
	wantCode(t, gone.Err(), connect.CodeNotFound, "no session")
}

// TestGroupsUnacknowledgedRevocationEndsTheSession: a member that does
// not acknowledge a revocation within the group's bound loses its session
// (long before its TTL), and only then does the next member get the
// partition: its grant is applied no earlier than the end of the
// first member's stream, so the two never owned it at once.
func TestGroupsUnacknowledgedRevocationEndsTheSession(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewGroupsClient(httpClient(t), n.URL)
	const bound = time.Second
	if _, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "lapse", Partitions: 2,
		RevokeTimeout: dur(bound)})); err != nil {
		t.Fatal(err)
	}
	a := joinGroup(t, c, "lapse", "a", time.Minute) // a TTL far past the test's bound
	aStream := assignmentsOf(t, n.URL, &pb.GroupsAssignmentsRequest{Group: "lapse", Member: "a", LeaseId: a.Lease.Id})
	nextChange(t, aStream, callTimeout)
	start := time.Now()
	b := joinGroup(t, c, "lapse", "b", time.Minute)
	bStream := assignmentsOf(t, n.URL, &pb.GroupsAssignmentsRequest{Group: "lapse", Member: "b", LeaseId: b.Lease.Id})
	if m := nextChange(t, bStream, callTimeout); len(m.Changes) != 0 {
		t.Fatalf("b got %s while a still owned it", describe(m))
	}
	if m := nextChange(t, aStream, callTimeout); describe(m) != "REVOKING:1" {
		t.Fatalf("a after b joined: %s", describe(m))
	}
	ended := nextChange(t, aStream, 20*time.Second) // not acknowledged: the bound ends the session
	if !strings.HasSuffix(describe(ended), "ENDED") {
		t.Fatalf("a after the bound: %s", describe(ended))
	}
	if took := time.Since(start); took < bound {
		t.Fatalf("a's session ended after %v, before the %v bound", took, bound)
	}
	added := nextChange(t, bStream, callTimeout)
	if describe(added) != "ADDED:0 ADDED:1" || added.Index < ended.Index {
		t.Fatalf("b after a lapsed: %s at index %d (a ended at %d)", describe(added), added.Index, ended.Index)
	}
	owners, got := groupOwners(t, c, "lapse")
	if strings.Join(owners, ",") != "b,b" || len(got.Members) != 1 {
		t.Fatalf("after the lapse: %q, members %v", owners, got.Members)
	}
}

// TestGroupsAssignmentsResume: a stream cut off resumes from the last
// index it answered, with no initial message, and gets exactly the changes
// applied after it.
func TestGroupsAssignmentsResume(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewGroupsClient(httpClient(t), n.URL)
	if _, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "r", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	a := joinGroup(t, c, "r", "a", 30*time.Second)
	req := &pb.GroupsAssignmentsRequest{Group: "r", Member: "a", LeaseId: a.Lease.Id}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Assignments(ctx, connect.NewRequest(req))
	if err != nil || !stream.Receive() {
		t.Fatalf("assignments: %v %v", err, stream.Err())
	}
	last := stream.Msg().Index
	cancel() // cut off
	stream.Close()
	joinGroup(t, c, "r", "b", 30*time.Second) // revokes partition 1 from a, while no stream runs
	req.FromIndex = &last
	resumed := assignmentsOf(t, n.URL, req)
	m := nextChange(t, resumed, callTimeout)
	if m.Initial || describe(m) != "REVOKING:1" || m.Index <= last {
		t.Fatalf("the resumed stream's first change: %v (%s)", m, describe(m))
	}
}

// TestGroupsAssignmentsOfAnEndedSessionAnswersAtOnce: the stream of a
// session that ended is refused with NotFound at once, even when its lease
// id (a token) is above the node's last index, as a session joined after
// grants of many partitions is: only a session this node has not seen
// issued is waited for (catch-up of a lagging follower).
func TestGroupsAssignmentsOfAnEndedSessionAnswersAtOnce(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewGroupsClient(httpClient(t), n.URL)
	if _, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "t", Partitions: 64})); err != nil {
		t.Fatal(err)
	}
	joinGroup(t, c, "t", "a", 30*time.Second) // 64 tokens in one entry
	b := joinGroup(t, c, "t", "b", 30*time.Second)
	if _, err := c.Leave(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsLeaveRequest{LeaseId: b.Lease.Id, Secret: b.Secret})); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stream, err := c.Assignments(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsAssignmentsRequest{Group: "t", Member: "b", LeaseId: b.Lease.Id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if stream.Receive() {
		t.Fatalf("a stream of an ended session answered %v", stream.Msg())
	}
	wantCode(t, stream.Err(), connect.CodeNotFound)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("NotFound took %v: the node waited to catch up with a session it had seen end", took)
	}
}
