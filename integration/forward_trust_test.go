package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
)

// A follower forwards to the leader as the caller: the leader charges the
// acquisition rate to the caller's token, or without auth to the caller's
// address (which the follower passes on), never to the follower and never
// nothing. Three callers, at a rate of one acquisition per 10s, each
// acquire once through a follower (by a unary Acquire, a Batch and a
// session stream): each is granted, so forwarding works; then each is
// refused on the leader directly, its one acquisition spent there.
func TestForwardingChargesTheOriginalCaller(t *testing.T) {
	for _, withAuth := range []bool{true, false} {
		t.Run(fmt.Sprintf("auth=%v", withAuth), func(t *testing.T) {
			callers := []string{"caller-a", "caller-b", "caller-c"} // token names, or loopback addresses
			f := server.AuthFile{}
			for _, name := range callers {
				f.Tokens = append(f.Tokens, server.TokenEntry{Name: name, SHA256: server.HashToken(name + "-token"), Role: "worker", Prefixes: []string{""}})
			}
			auth, err := server.NewAuthenticator(f)
			if err != nil {
				t.Fatal(err)
			}
			if !withAuth {
				callers = []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
			}
			c := testcluster.StartServers(t, 3, func(sc *server.Config) {
				sc.AcquireRate = 0.1 // a burst of 1, one more each 10s
				if withAuth {
					sc.Auth = auth
				}
			})
			lead := c.WaitLeader(10 * time.Second)
			follower := (lead + 1) % 3
			for i, who := range callers {
				hc, opt := testutil.HTTPClientFrom(t, "127.0.0.1"), connect.WithInterceptors(testutil.SetHeaders(func(h http.Header) { h.Set("Authorization", "Bearer "+who+"-token") }))
				if !withAuth {
					hc, opt = testutil.HTTPClientFrom(t, who), connect.WithInterceptors()
				}
				name := fmt.Sprintf("fwd-charge/%s", who)
				via := leaseholdv1connect.NewLeasesClient(hc, c.URL(follower), opt)
				switch i {
				case 0:
					_, err = via.Acquire(ctxFor(t, 10*time.Second), connect.NewRequest(acquireReq(name)))
				case 1:
					var res *connect.Response[pb.BatchResponse]
					res, err = via.Batch(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.BatchRequest{
						Ops: []*pb.BatchOp{{Op: &pb.BatchOp_Acquire{Acquire: acquireReq(name)}}}}))
					if err == nil && res.Msg.Results[0].GetAcquire() == nil {
						err = fmt.Errorf("%v", res.Msg.Results[0])
					}
				case 2:
					err = acquireOnSession(t, leaseholdv1connect.NewSessionsClient(hc, c.URL(follower), opt), acquireReq(name))
				}
				if err != nil {
					t.Fatalf("%s acquiring through follower %s: %v", who, c.ID(follower), err)
				}
				direct := leaseholdv1connect.NewLeasesClient(hc, c.URL(lead), opt)
				_, err = direct.Acquire(ctxFor(t, 10*time.Second), connect.NewRequest(acquireReq(name+"/again")))
				if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), fmt.Sprintf("%q", who)) {
					t.Fatalf("%s acquiring on leader %s after one acquisition through a follower: %v, want resource_exhausted charged to %q",
						who, c.ID(lead), err, who)
				}
			}
		})
	}
}

func acquireReq(resource string) *pb.AcquireRequest {
	return &pb.AcquireRequest{Resources: []string{resource}, Ttl: durationpb.New(time.Minute)}
}

// acquireOnSession acquires on a session stream of sessions.
func acquireOnSession(t *testing.T, sessions leaseholdv1connect.SessionsClient, req *pb.AcquireRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := sessions.Session(ctx)
	defer s.CloseResponse()
	if err := s.Send(&pb.SessionRequest{Ops: []*pb.SessionOp{{Id: 1, Op: &pb.BatchOp{Op: &pb.BatchOp_Acquire{Acquire: req}}}}}); err != nil {
		return err
	}
	res, err := s.Receive()
	if err != nil {
		return err
	}
	s.CloseRequest()
	if r := res.Results[0]; r.GetResult().GetAcquire() == nil {
		return fmt.Errorf("%v", r)
	}
	return nil
}
