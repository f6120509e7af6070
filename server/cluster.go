package server

import (
	"context"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/cluster"
)

// clusterAPI implements leaseholdv1connect.ClusterHandler.
type clusterAPI struct{ s *Server }

// statusTimeout bounds asking one member for its status.
const statusTimeout = 2 * time.Second

func (h clusterAPI) Members(ctx context.Context, req *connect.Request[pb.MembersRequest]) (*connect.Response[pb.MembersResponse], error) {
	ms, err := h.s.node.Members()
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
	err := h.s.node.AddVoter(req.Msg.Id, req.Msg.RaftAddr)
	if err != nil {
		return nil, err
	}
	h.s.log.Info("added voter", "id", req.Msg.Id, "raft_addr", req.Msg.RaftAddr)
	return connect.NewResponse(&pb.AddVoterResponse{}), nil
}

func (h clusterAPI) RemoveServer(ctx context.Context, req *connect.Request[pb.RemoveServerRequest]) (*connect.Response[pb.RemoveServerResponse], error) {
	err := h.s.node.RemoveServer(req.Msg.Id)
	if err != nil {
		return nil, err
	}
	h.s.log.Info("removed server", "id", req.Msg.Id)
	return connect.NewResponse(&pb.RemoveServerResponse{}), nil
}

func (h clusterAPI) TransferLeader(ctx context.Context, req *connect.Request[pb.TransferLeaderRequest]) (*connect.Response[pb.TransferLeaderResponse], error) {
	err := h.s.node.TransferLeadership(req.Msg.Id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.TransferLeaderResponse{}), nil
}

func statusPB(st cluster.LocalStatus, addr string) *pb.NodeStatus {
	return &pb.NodeStatus{
		Id: st.ID, RaftAddr: addr, State: st.State, Term: st.Term, CommitIndex: st.CommitIndex,
		AppliedIndex: st.AppliedIndex, LastIndex: st.LastIndex, LeaderId: st.LeaderID,
		LastContact: durationpb.New(st.LastContact),
	}
}

// Status answers for this node, and unless asked for local only, asks every
// member in parallel over its raft port.
func (h clusterAPI) Status(ctx context.Context, req *connect.Request[pb.StatusRequest]) (*connect.Response[pb.StatusResponse], error) {
	s := h.s
	self := s.node.LocalStatus()
	if req.Msg.Local {
		return connect.NewResponse(&pb.StatusResponse{Nodes: []*pb.NodeStatus{statusPB(self, "")}}), nil
	}
	ms, err := s.node.Members()
	if err != nil {
		return nil, err
	}
	out := make([]*pb.NodeStatus, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		if m.ID == self.ID {
			out[i] = statusPB(self, m.Addr)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, statusTimeout)
			defer cancel()
			resp, err := client[pb.StatusRequest, pb.StatusResponse](s.fwd, m.Addr, leaseholdv1connect.ClusterStatusProcedure).
				CallUnary(cctx, forwarded(s.fwd, req, &pb.StatusRequest{Local: true}))
			if err != nil || len(resp.Msg.Nodes) != 1 {
				out[i] = &pb.NodeStatus{Id: m.ID, RaftAddr: m.Addr, State: "unreachable", Error: api.FromConnect(err).Error()}
				return
			}
			out[i] = resp.Msg.Nodes[0]
			out[i].RaftAddr = m.Addr
		}()
	}
	wg.Wait()
	return connect.NewResponse(&pb.StatusResponse{Nodes: out}), nil
}
