package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
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
)

// callTimeout bounds every single call a test makes that is not meant to
// block; a waiting Acquire gets its own, longer bound.
const callTimeout = 10 * time.Second

// startNode starts a real single-voter node for t.
func startNode(t testing.TB) *testcluster.Node {
	t.Helper()
	return testcluster.StartNode(t, "")
}

// httpClient is a plain HTTP/1.1 client whose idle connections are closed
// when the test ends, so no keep-alive goroutine outlives it.
func httpClient(t testing.TB) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return c
}

// h2cClient speaks HTTP/2 without TLS (prior knowledge) and nothing else,
// as a gRPC client does.
func h2cClient(t testing.TB) *http.Client {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// newClient is a Connect-protocol (binary protobuf) client for node.
func newClient(t testing.TB, n *testcluster.Node, opts ...connect.ClientOption) leaseholdv1connect.LeasesClient {
	t.Helper()
	return leaseholdv1connect.NewLeasesClient(httpClient(t), n.URL, opts...)
}

// ctxFor and eventually keep their old names for this package's tests.
var (
	ctxFor     = testutil.Context
	eventually = testutil.Eventually[func() bool]
)

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func newSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

type acquired struct {
	Lease  *pb.Lease
	Secret string
}

func acquire(t testing.TB, c leaseholdv1connect.LeasesClient, req *pb.AcquireRequest) (*acquired, error) {
	t.Helper()
	timeout := callTimeout
	if w := req.GetWait().AsDuration(); w > 0 {
		timeout += w
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := c.Acquire(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return &acquired{Lease: res.Msg.GetLease(), Secret: res.Msg.GetSecret()}, nil
}

func mustAcquire(t testing.TB, c leaseholdv1connect.LeasesClient, req *pb.AcquireRequest) *acquired {
	t.Helper()
	a, err := acquire(t, c, req)
	if err != nil {
		t.Fatalf("acquire %q: %v", req.GetResources(), err)
	}
	if a.Lease == nil || a.Lease.GetId() == 0 || a.Lease.GetToken() == 0 {
		t.Fatalf("acquire %q: reply without a lease: %v", req.GetResources(), a.Lease)
	}
	return a
}

func renew(c leaseholdv1connect.LeasesClient, id uint64, secret string) (*pb.RenewResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.Renew(ctx, connect.NewRequest(&pb.RenewRequest{LeaseId: id, Secret: secret}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

func release(c leaseholdv1connect.LeasesClient, id uint64, secret string) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err := c.Release(ctx, connect.NewRequest(&pb.ReleaseRequest{LeaseId: id, Secret: secret}))
	return err
}

func mustRelease(t testing.TB, c leaseholdv1connect.LeasesClient, a *acquired) {
	t.Helper()
	if err := release(c, a.Lease.GetId(), a.Secret); err != nil {
		t.Fatalf("release lease %d: %v", a.Lease.GetId(), err)
	}
}

func get(t testing.TB, c leaseholdv1connect.LeasesClient, resource string) *pb.GetResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.Get(ctx, connect.NewRequest(&pb.GetRequest{Resource: resource}))
	if err != nil {
		t.Fatalf("get %q: %v", resource, err)
	}
	return res.Msg
}

// waitForWaiters polls Get until resource has exactly n waiters.
func waitForWaiters(t testing.TB, c leaseholdv1connect.LeasesClient, resource string, n int) *pb.GetResponse {
	t.Helper()
	var last *pb.GetResponse
	eventually(t, 5*time.Second, "waiters did not reach the expected count on "+resource, func() bool {
		last = get(t, c, resource)
		return len(last.GetWaiters()) == n
	})
	return last
}

// wantCode fails t unless err is a Connect error with code want whose
// message contains every one of substrs.
func wantCode(t testing.TB, err error, want connect.Code, substrs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want %v", want)
	}
	if got := connect.CodeOf(err); got != want {
		t.Fatalf("got code %v (%v), want %v", got, err, want)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("not a connect error: %v", err)
	}
	for _, s := range substrs {
		if !strings.Contains(ce.Message(), s) {
			t.Errorf("message %q does not mention %q", ce.Message(), s)
		}
	}
}

// postJSON posts body to the procedure with Content-Type application/json
// and returns the status and the decoded JSON reply.
func postJSON(t testing.TB, c *http.Client, n *testcluster.Node, procedure, body string) (int, map[string]any) {
	t.Helper()
	status, raw := post(t, c, n.URL+procedure, "application/json", []byte(body))
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: reply is not JSON: %v: %q", procedure, err, raw)
	}
	return status, out
}

func post(t testing.TB, c *http.Client, url, contentType string, body []byte) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("POST %s: read reply: %v", url, err)
	}
	return res.StatusCode, raw
}
