package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

func kvList(c leaseholdv1connect.KVClient, req *pb.KVListRequest) (*pb.KVListResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.List(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// List pages through a prefix in key order, showing each key's bound
// lease, and refuses bad pages with InvalidArgument.
func TestKVListPagesWithLeases(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)
	kv := leaseholdv1connect.NewKVClient(httpClient(t), n.URL)
	held := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"svc/api"}, Ttl: dur(time.Minute)})
	ops := []*pb.TxnOp{txnPut("other", nil)}
	for i := range 5 {
		ops = append(ops, txnBoundPut(fmt.Sprintf("alive/api/node-%d", i), []byte("addr"), held.Lease.GetId(), held.Secret))
	}
	if _, err := txn(kv, &pb.TxnRequest{ThenOps: ops}); err != nil {
		t.Fatal(err)
	}
	var got []string
	token := ""
	for page := 0; ; page++ {
		res, err := kvList(kv, &pb.KVListRequest{Prefix: "alive/", PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			if it.LeaseId != held.Lease.GetId() || string(it.Value) != "addr" || it.Version == 0 {
				t.Errorf("item %v: want bound to lease %d", it, held.Lease.GetId())
			}
			got = append(got, it.Key)
		}
		if token = res.NextPageToken; token == "" {
			break
		}
		if page > 5 {
			t.Fatal("List never ends")
		}
	}
	if fmt.Sprint(got) != "[alive/api/node-0 alive/api/node-1 alive/api/node-2 alive/api/node-3 alive/api/node-4]" {
		t.Fatalf("listed %v", got)
	}
	mustRelease(t, c, held)
	if res, err := kvList(kv, &pb.KVListRequest{Prefix: "alive/"}); err != nil || len(res.Items) != 0 {
		t.Fatalf("after the lease ended: %v (%v), want nobody alive", res, err)
	}
	_, err := kvList(kv, &pb.KVListRequest{PageSize: 1001})
	wantCode(t, err, connect.CodeInvalidArgument, "page_size is 1001")
	_, err = kvList(kv, &pb.KVListRequest{PageToken: "a\x01"})
	wantCode(t, err, connect.CodeInvalidArgument, "page_token")
	_, err = kvList(kv, &pb.KVListRequest{Prefix: "\x07"})
	wantCode(t, err, connect.CodeInvalidArgument, "prefix")
}

// A worker token may compare, write, fence and list only inside its
// prefixes: a transaction naming any key outside is refused whole.
func TestKVTxnAndListStayInsideWorkerPrefixes(t *testing.T) {
	t.Parallel()
	const workerTok = "worker-token-0123456789"
	auth, err := server.NewAuthenticator(server.AuthFile{Tokens: []server.TokenEntry{
		{Name: "wendy", SHA256: server.HashToken(workerTok), Role: "worker", Prefixes: []string{"mine/"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.Auth = auth })
	kv := leaseholdv1connect.NewKVClient(httpClient(t), n.URL, withToken(workerTok))
	if _, err := txn(kv, &pb.TxnRequest{Compares: []*pb.Compare{absent("mine/a")}, ThenOps: []*pb.TxnOp{txnPut("mine/a", nil)}}); err != nil {
		t.Fatalf("a txn inside the prefix: %v", err)
	}
	for name, req := range map[string]*pb.TxnRequest{
		"a compare":  {Compares: []*pb.Compare{absent("theirs/a")}, ThenOps: []*pb.TxnOp{txnPut("mine/b", nil)}},
		"a then op":  {ThenOps: []*pb.TxnOp{txnPut("mine/b", nil), txnDelete("theirs/a")}},
		"an else op": {ThenOps: []*pb.TxnOp{txnPut("mine/b", nil)}, ElseOps: []*pb.TxnOp{txnPut("theirs/a", nil)}},
		"its fence":  {ThenOps: []*pb.TxnOp{txnPut("mine/b", nil)}, Fence: &pb.Fence{Resource: "theirs/r", Token: 1}},
	} {
		_, err := txn(kv, req)
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("a txn with %s outside the prefix: %v, want PermissionDenied", name, err)
		}
	}
	if _, err := kvList(kv, &pb.KVListRequest{Prefix: "mine/"}); err != nil {
		t.Errorf("list inside the prefix: %v", err)
	}
	if _, err := kvList(kv, &pb.KVListRequest{Prefix: ""}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("list of every key: %v, want PermissionDenied", err)
	}
	if _, err := kvGet(kv, "mine/b"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("mine/b after refused txns: %v, want NotFound", err)
	}
}
