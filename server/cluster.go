package server

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/service"
)

// clusterAPI implements leaseholdv1connect.ClusterHandler.
type clusterAPI struct{ s *Server }

func (h clusterAPI) Members(ctx context.Context, req *connect.Request[pb.MembersRequest]) (*connect.Response[pb.MembersResponse], error) {
	ms, err := h.s.svc.Members(ctx)
	if err != nil {
		return nil, err
	}
	out := &pb.MembersResponse{}
	for _, m := range ms {
		out.Members = append(out.Members, &pb.Member{Id: m.ID, RaftAddr: m.Addr, Voter: m.Voter, Leader: m.IsLeader})
	}
	return connect.NewResponse(out), nil
}

func (h clusterAPI) AddVoter(ctx context.Context, req *connect.Request[pb.AddVoterRequest]) (*connect.Response[pb.AddVoterResponse], error) {
	if err := h.s.svc.AddVoter(ctx, req.Msg.Id, req.Msg.RaftAddr); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.AddVoterResponse{}), nil
}

func (h clusterAPI) RemoveServer(ctx context.Context, req *connect.Request[pb.RemoveServerRequest]) (*connect.Response[pb.RemoveServerResponse], error) {
	if err := h.s.svc.RemoveServer(ctx, req.Msg.Id); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.RemoveServerResponse{}), nil
}

func (h clusterAPI) TransferLeader(ctx context.Context, req *connect.Request[pb.TransferLeaderRequest]) (*connect.Response[pb.TransferLeaderResponse], error) {
	if from := req.Msg.From; from != "" && req.Msg.Id == "" {
		if st := h.s.svc.LocalStatus(); st.State == "Leader" && st.ID != from {
			return connect.NewResponse(&pb.TransferLeaderResponse{}), nil // moved away from already
		}
	}
	if err := h.s.svc.TransferLeader(ctx, req.Msg.Id); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.TransferLeaderResponse{}), nil
}

// Status answers for this node, or, unless asked for local only, for every
// member: the service asks the others, through askStatus.
func (h clusterAPI) Status(ctx context.Context, req *connect.Request[pb.StatusRequest]) (*connect.Response[pb.StatusResponse], error) {
	if req.Msg.Local {
		return connect.NewResponse(&pb.StatusResponse{Nodes: []*pb.NodeStatus{statusPB(h.s.svc.LocalStatus(), "")}}), nil
	}
	sts, err := h.s.svc.Status(ctx, h.askStatus(req))
	if err != nil {
		return nil, err
	}
	out := make([]*pb.NodeStatus, len(sts))
	for i, st := range sts {
		if st.Err != nil {
			out[i] = &pb.NodeStatus{Id: st.Status.ID, RaftAddr: st.Addr, State: "unreachable", Error: st.Err.Error()}
			continue
		}
		out[i] = statusPB(st.Status, st.Addr)
	}
	return connect.NewResponse(&pb.StatusResponse{Nodes: out}), nil
}

// askStatus asks one member for its local status over its raft port, with
// the caller's credentials.
func (h clusterAPI) askStatus(in connect.AnyRequest) service.AskStatus {
	return func(ctx context.Context, addr string) (service.NodeStatus, error) {
		f := h.s.fwd
		resp, err := f.caller(addr, api.Lookup(leaseholdv1connect.ClusterStatusProcedure)).
			CallUnary(ctx, &pb.StatusRequest{Local: true}, f.forwardHeader(in.Header(), in.Peer().Addr))
		if err != nil {
			return service.NodeStatus{}, api.FromConnect(err)
		}
		nodes := resp.Any().(*pb.StatusResponse).Nodes
		if n := len(nodes); n != 1 {
			return service.NodeStatus{}, fmt.Errorf("answered %d statuses for one node", n)
		}
		return statusOf(nodes[0]), nil
	}
}

func statusPB(st service.NodeStatus, addr string) *pb.NodeStatus {
	return &pb.NodeStatus{
		Id: st.ID, RaftAddr: addr, State: st.State, Term: st.Term, CommitIndex: st.CommitIndex,
		AppliedIndex: st.AppliedIndex, LastIndex: st.LastIndex, LeaderId: st.LeaderID,
		LastContact: durationpb.New(st.LastContact),
	}
}

// statusOf is statusPB's inverse, for a member's answer.
func statusOf(n *pb.NodeStatus) service.NodeStatus {
	return service.NodeStatus{
		ID: n.Id, State: n.State, Term: n.Term, CommitIndex: n.CommitIndex,
		AppliedIndex: n.AppliedIndex, LastIndex: n.LastIndex, LeaderID: n.LeaderId,
		LastContact: n.LastContact.AsDuration(),
	}
}
