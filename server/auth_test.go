package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// Tokens used by the auth tests. Only their hashes go to the server.
const (
	workerToken   = "worker-token-0123456789"
	operatorToken = "operator-token-0123456789"
	adminToken    = "admin-token-0123456789"
)

func authNode(t *testing.T) *testcluster.Node {
	t.Helper()
	auth := testAuthenticator(t)
	return testcluster.StartServerNode(t, func(c *server.Config) { c.Auth = auth })
}

// testAuthenticator knows workerToken, operatorToken and adminToken.
func testAuthenticator(t *testing.T) *server.Authenticator {
	t.Helper()
	auth, err := server.NewAuthenticator(server.AuthFile{Tokens: []server.TokenEntry{
		{Name: "ci-worker", SHA256: server.HashToken(workerToken), Role: "worker", Prefixes: []string{"jobs/"}},
		{Name: "olga", SHA256: server.HashToken(operatorToken), Role: "operator"},
		{Name: "alice", SHA256: server.HashToken(adminToken), Role: "admin"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return auth
}

func tokenClient(t *testing.T, url, token string) *client.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(client.Config{Endpoints: []string{url}, Token: token, Logger: testcluster.Logger(),
		HTTPClient: &http.Client{Transport: tr}, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // ends its background work before goleak looks
	return c
}

func TestAuthRoles(t *testing.T) {
	n := authNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	worker := tokenClient(t, n.URL, workerToken)
	operator := tokenClient(t, n.URL, operatorToken)
	admin := tokenClient(t, n.URL, adminToken)
	nobody := tokenClient(t, n.URL, "")
	wrong := tokenClient(t, n.URL, "not-a-token")

	for name, c := range map[string]*client.Client{"no token": nobody, "unknown token": wrong} {
		if _, err := c.Acquire(ctx, "jobs/a", client.ManualRenew()); !errors.Is(err, leasehold.ErrUnauthenticated) {
			t.Fatalf("%s: acquire: %v, want Unauthenticated", name, err)
		}
	}

	l, err := worker.Acquire(ctx, "jobs/nightly", client.TTL(time.Minute), client.ManualRenew())
	if err != nil {
		t.Fatalf("worker acquire inside its prefix: %v", err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("worker renew: %v", err)
	}
	if _, err := worker.Acquire(ctx, "billing/x", client.ManualRenew()); !errors.Is(err, leasehold.ErrPermission) {
		t.Fatalf("worker outside its prefixes: %v, want PermissionDenied", err)
	}
	if _, err := worker.AcquireMany(ctx, []string{"jobs/b", "billing/y"}, client.ManualRenew()); !errors.Is(err, leasehold.ErrPermission) {
		t.Fatalf("worker with one resource outside its prefixes: %v", err)
	}
	if _, err := worker.Put(ctx, "billing/k", []byte("v")); !errors.Is(err, leasehold.ErrPermission) {
		t.Fatalf("worker put outside its prefixes: %v", err)
	}
	if _, err := worker.Get(ctx, "jobs/nightly"); !errors.Is(err, leasehold.ErrPermission) {
		t.Fatalf("worker inspection: %v, want PermissionDenied", err)
	}
	if _, err := worker.List(ctx, "", 10, ""); !errors.Is(err, leasehold.ErrPermission) {
		t.Fatalf("worker list: %v, want PermissionDenied", err)
	}
	if _, err := worker.Members(ctx); !errors.Is(err, leasehold.ErrPermission) {
		t.Fatalf("worker members: %v", err)
	}

	if g, err := operator.Get(ctx, "jobs/nightly"); err != nil || g.Holder == nil || g.Holder.ID != l.ID() {
		t.Fatalf("operator inspection: %v %v", g, err)
	}
	if err := operator.TransferLeader(ctx, ""); !errors.Is(err, leasehold.ErrPermission) {
		t.Fatalf("operator membership change: %v, want PermissionDenied", err)
	}
	if _, err := admin.Members(ctx); err != nil {
		t.Fatalf("admin members: %v", err)
	}
	// A backup holds every key's value: admins only.
	discard := func(client.SnapshotInfo) (io.Writer, error) { return io.Discard, nil }
	for name, c := range map[string]*client.Client{"worker": worker, "operator": operator} {
		if _, err := c.Snapshot(ctx, discard); !errors.Is(err, leasehold.ErrPermission) {
			t.Fatalf("%s snapshot: %v, want PermissionDenied", name, err)
		}
	}
	if info, err := admin.Snapshot(ctx, discard); err != nil || info.Index == 0 || info.Size == 0 {
		t.Fatalf("admin snapshot: %+v, %v", info, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAcquireRateLimit(t *testing.T) {
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.AcquireRate = 5 })
	c := tokenClient(t, n.URL, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var limited error
	for i := range 30 {
		l, err := c.Acquire(ctx, "r", client.ManualRenew())
		if err != nil {
			limited = err
			break
		}
		_ = i
		l.Release(ctx)
	}
	if !errors.Is(limited, leasehold.ErrLimit) {
		t.Fatalf("30 quick acquisitions at 5/s: %v, want ResourceExhausted", limited)
	}
}

func tlsClient(t *testing.T, url string, cfg *tls.Config) *client.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(client.Config{Endpoints: []string{url}, Logger: testcluster.Logger(),
		HTTPClient: &http.Client{Transport: tr}, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // ends its background work before goleak looks
	return c
}

func tryAcquire(c *client.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	l, err := c.Acquire(ctx, "tls/x", client.ManualRenew())
	if err == nil {
		l.Release(ctx)
	}
	return err
}

func TestTLS(t *testing.T) {
	cs := testcluster.NewCerts(t)
	t.Run("server TLS", func(t *testing.T) {
		n := testcluster.StartServerNode(t, func(c *server.Config) {
			c.TLS = &tls.Config{Certificates: []tls.Certificate{cs.Server}}
		})
		if err := tryAcquire(tlsClient(t, n.HTTPSURL(), &tls.Config{RootCAs: cs.CAPool})); err != nil {
			t.Fatalf("client trusting the CA: %v", err)
		}
		if err := tryAcquire(tlsClient(t, n.HTTPSURL(), &tls.Config{})); err == nil {
			t.Fatal("a client without the CA was served")
		}
		if err := tryAcquire(tlsClient(t, n.HTTPSURL(), &tls.Config{RootCAs: cs.Foreign})); err == nil {
			t.Fatal("a client trusting another CA was served")
		}
		if err := tryAcquire(tlsClient(t, n.URL, nil)); err == nil {
			t.Fatal("plain HTTP was served on the TLS port")
		}
	})
	t.Run("mutual TLS", func(t *testing.T) {
		n := testcluster.StartServerNode(t, func(c *server.Config) {
			c.TLS = &tls.Config{Certificates: []tls.Certificate{cs.Server}, ClientCAs: cs.CAPool, ClientAuth: tls.RequireAndVerifyClientCert}
		})
		if err := tryAcquire(tlsClient(t, n.HTTPSURL(), &tls.Config{RootCAs: cs.CAPool, Certificates: []tls.Certificate{cs.Client}})); err != nil {
			t.Fatalf("client with a certificate: %v", err)
		}
		if err := tryAcquire(tlsClient(t, n.HTTPSURL(), &tls.Config{RootCAs: cs.CAPool})); err == nil {
			t.Fatal("a client without a certificate was served")
		}
	})
}

// The Authorization scheme is case-insensitive (RFC 9110): "bearer",
// "BEARER" and extra spaces are accepted; other schemes are not.
func TestAuthSchemeCaseInsensitive(t *testing.T) {
	t.Parallel()
	n := authNode(t)
	hc := httpClient(t)
	for _, tc := range []struct {
		header string
		want   int
	}{
		{"Bearer " + operatorToken, http.StatusOK},
		{"bearer " + operatorToken, http.StatusOK},
		{"BEARER " + operatorToken, http.StatusOK},
		{"bEaReR  " + operatorToken, http.StatusOK},
		{"Basic " + operatorToken, http.StatusUnauthorized},
		{"Bearer", http.StatusUnauthorized},
		{"Bearer ", http.StatusUnauthorized},
		{"Bearer" + operatorToken, http.StatusUnauthorized},
		{operatorToken, http.StatusUnauthorized},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL+"/leasehold.v1.Leases/Get",
			strings.NewReader(`{"resource":"scheme/x"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", tc.header)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		if res.StatusCode != tc.want {
			t.Errorf("Authorization %q: status %d %s, want %d", strings.Replace(tc.header, operatorToken, "TOKEN", 1), res.StatusCode, body, tc.want)
		}
	}
}

// Requests refused as invalid charge nothing to the client's acquisition
// rate: an oversized batch once locked its client out of Acquire for as
// long as its ops took to pay back.
func TestRateChargesOnlyAccepted(t *testing.T) {
	t.Parallel()
	// Burst 1, one acquisition back every 2s.
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.AcquireRate = 0.5 })
	c := newClient(t, n)
	var ops []*pb.BatchOp
	for i := range leasehold.MaxBatchOps + 1 {
		ops = append(ops, opAcquire(&pb.AcquireRequest{Resources: []string{fmt.Sprintf("charge/%d", i)}}))
	}
	_, err := batch(c, ops...)
	wantCode(t, err, connect.CodeInvalidArgument, "split the batch")
	rs := mustBatch(t, c, opAcquire(&pb.AcquireRequest{Resources: []string{""}}), opAcquire(&pb.AcquireRequest{Ttl: dur(time.Hour)}))
	if rs[0].GetError() == nil || rs[1].GetError() == nil {
		t.Fatalf("invalid acquires in a batch: %v", rs)
	}
	for range 3 {
		_, err := acquire(t, c, &pb.AcquireRequest{Resources: []string{"charge/x"}, Ttl: dur(0)})
		wantCode(t, err, connect.CodeInvalidArgument, "ttl")
	}
	// The bucket is still full (TestBatchRateLimit shows a valid acquire
	// empties it).
	a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"charge/x"}, Ttl: dur(time.Minute)})
	mustRelease(t, c, a)
}
