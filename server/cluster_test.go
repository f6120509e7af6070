package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/service"
)

// fakeMembers answers the cluster handlers with a made-up three-member
// cluster; other methods panic (the embedded nil interface).
type fakeMembers struct {
	service.API
	transferredTo chan string
}

func (fakeMembers) Members(context.Context) ([]service.Member, error) {
	return []service.Member{{ID: "a", Addr: "10.0.0.1:7421", Voter: true, IsLeader: true}, {ID: "b", Addr: "10.0.0.2:7421", Voter: true}, {ID: "c", Addr: "10.0.0.3:7421"}}, nil
}

func (fakeMembers) Status(context.Context, service.AskStatus) ([]service.MemberStatus, error) {
	return []service.MemberStatus{
		{Addr: "10.0.0.1:7421", Status: service.NodeStatus{ID: "a", State: "Leader", Term: 4, CommitIndex: 9, LastContact: time.Second}},
		{Addr: "10.0.0.2:7421", Status: service.NodeStatus{ID: "b"}, Err: errors.New("connection refused")},
	}, nil
}

func (f fakeMembers) TransferLeader(_ context.Context, id string) error {
	f.transferredTo <- id
	return nil
}

// The cluster handlers answer from the Service, as the lease handlers do:
// members, the status of every member (an unreachable one with its error)
// and a leadership transfer all come from it, not from the node.
func TestClusterHandlersAnswerFromTheService(t *testing.T) {
	t.Parallel()
	f := fakeMembers{transferredTo: make(chan string, 1)}
	n := startFake(t, f)
	c := leaseholdv1connect.NewClusterClient(httpClient(t), n.URL)
	ctx := ctxFor(t, 30*time.Second)

	ms, err := c.Members(ctx, connect.NewRequest(&pb.MembersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if m := ms.Msg.Members; len(m) != 3 || m[0].Id != "a" || !m[0].Leader || m[1].RaftAddr != "10.0.0.2:7421" || m[2].Voter {
		t.Errorf("Members answered %v: want the service's a (leader), b, c (non-voter)", m)
	}

	st, err := c.Status(ctx, connect.NewRequest(&pb.StatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Msg.Nodes; len(s) != 2 || s[0].Id != "a" || s[0].Term != 4 || s[0].LastContact.AsDuration() != time.Second ||
		s[0].RaftAddr != "10.0.0.1:7421" || s[1].State != "unreachable" || s[1].Error != "connection refused" {
		t.Errorf("Status answered %v: want a's status and b unreachable with its error", s)
	}

	if _, err := c.TransferLeader(ctx, connect.NewRequest(&pb.TransferLeaderRequest{Id: "b"})); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-f.transferredTo:
		if got != "b" {
			t.Errorf("the service was asked to transfer to %q, want b", got)
		}
	default:
		t.Error("TransferLeader answered without asking the service")
	}
}
