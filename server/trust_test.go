package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
)

// forging sets the headers only a node may send, with a new caller
// address each time, and the bearer token (if any), on every request.
func forging(token string) connect.ClientOption {
	var n int
	return connect.WithInterceptors(testutil.SetHeaders(func(h http.Header) {
		n++
		h.Set("Leasehold-Forwarded-By", "n9")
		h.Set("Leasehold-Forwarded-For", fmt.Sprintf("10.9.%d.%d", n/256, n%256))
		if token != "" {
			h.Set("Authorization", "Bearer "+token)
		}
	}))
}

// The hole as found: a client that sent Leasehold-Forwarded-By got 12 of
// 12 acquires granted at --acquire-rate 2, and a 200-acquire Batch. The
// API listener drops the headers only a node sends, so a forged one
// changes nothing: not the rate (unary, Batch, session stream), and
// without auth not the address it is charged to.
func TestForgedForwardingHeadersChangeNothing(t *testing.T) {
	t.Parallel()
	for _, withAuth := range []bool{true, false} {
		t.Run(fmt.Sprintf("auth=%v", withAuth), func(t *testing.T) {
			t.Parallel()
			token := ""
			n := testcluster.StartServerNode(t, func(c *server.Config) {
				c.AcquireRate = 2 // a burst of 4
				if withAuth {
					c.Auth = testAuthenticator(t)
				}
			})
			if withAuth {
				token = workerToken
			}
			hc := h2cClient(t)
			leases := leaseholdv1connect.NewLeasesClient(hc, n.URL, forging(token))
			start := time.Now()
			granted := 0
			for i := range 12 {
				_, err := leases.Acquire(ctxFor(t, callTimeout), connect.NewRequest(&pb.AcquireRequest{
					Resources: []string{fmt.Sprintf("jobs/forged/%d", i)}, Ttl: dur(time.Minute)}))
				switch {
				case err == nil:
					granted++
				case connect.CodeOf(err) != connect.CodeResourceExhausted:
					t.Fatalf("acquire %d: %v", i, err)
				}
			}
			if most := 4 + int(2*time.Since(start).Seconds()); granted > most {
				t.Errorf("12 unary acquires with forged node headers at 2/s: %d granted, want at most %d", granted, most)
			}

			var ops []*pb.BatchOp
			for i := range 200 {
				ops = append(ops, opAcquire(&pb.AcquireRequest{Resources: []string{fmt.Sprintf("jobs/forged-batch/%d", i)}, Ttl: dur(time.Minute)}))
			}
			if _, err := leases.Batch(ctxFor(t, callTimeout), connect.NewRequest(&pb.BatchRequest{Ops: ops})); connect.CodeOf(err) != connect.CodeResourceExhausted {
				t.Errorf("a batch of 200 acquires with forged node headers at 2/s: %v, want resource_exhausted", err)
			}

			// The stream as another caller, whose bucket is full: another
			// token, or another address.
			if withAuth {
				token = operatorToken
			} else {
				hc = testutil.HTTPClientFrom(t, "127.0.0.2")
			}
			sessions := leaseholdv1connect.NewSessionsClient(hc, n.URL, forging(token))
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			s := sessions.Session(ctx)
			var req pb.SessionRequest
			for i := range 12 {
				req.Ops = append(req.Ops, &pb.SessionOp{Id: uint64(i + 1), Op: opAcquire(&pb.AcquireRequest{
					Resources: []string{fmt.Sprintf("jobs/forged-session/%d", i)}, Ttl: dur(time.Minute)})})
			}
			start = time.Now()
			if err := s.Send(&req); err != nil {
				t.Fatal(err)
			}
			granted = 0
			for answered := 0; answered < 12; {
				res, err := s.Receive()
				if err != nil {
					t.Fatalf("session: %v after %d answers", err, answered)
				}
				for _, r := range res.Results {
					answered++
					if r.GetResult().GetAcquire() != nil {
						granted++
					}
				}
			}
			s.CloseRequest()
			s.CloseResponse()
			if most := 4 + int(2*time.Since(start).Seconds()); granted > most {
				t.Errorf("12 acquires on a session stream with forged node headers at 2/s: %d granted, want at most %d", granted, most)
			}
		})
	}
}
