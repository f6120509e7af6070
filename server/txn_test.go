package server_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

func txnPut(key string, value []byte) *pb.TxnOp {
	return &pb.TxnOp{Op: &pb.TxnOp_Put{Put: &pb.TxnPut{Key: key, Value: value}}}
}

func txnBoundPut(key string, value []byte, id uint64, secret string) *pb.TxnOp {
	return &pb.TxnOp{Op: &pb.TxnOp_Put{Put: &pb.TxnPut{Key: key, Value: value, LeaseId: id, LeaseSecret: secret}}}
}

func txnDelete(key string) *pb.TxnOp {
	return &pb.TxnOp{Op: &pb.TxnOp_Delete{Delete: &pb.TxnDelete{Key: key}}}
}

func absent(key string) *pb.Compare {
	return &pb.Compare{Key: key, Op: pb.CompareOp_COMPARE_OP_ABSENT}
}

func txn(c leaseholdv1connect.KVClient, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.Txn(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

func kvGet(c leaseholdv1connect.KVClient, key string) (*pb.KVGetResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.Get(ctx, connect.NewRequest(&pb.KVGetRequest{Key: key}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// Every malformed transaction is refused at the edge with the code and a
// message naming the field or limit, and writes nothing.
func TestTxnBadInput(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	kv := leaseholdv1connect.NewKVClient(httpClient(t), n.URL)
	ops := func(k int) []*pb.TxnOp {
		out := make([]*pb.TxnOp, k)
		for i := range out {
			out[i] = txnPut(fmt.Sprintf("bad/k%d", i), nil)
		}
		return out
	}
	cmps := func(k int) []*pb.Compare {
		out := make([]*pb.Compare, k)
		for i := range out {
			out[i] = absent(fmt.Sprintf("bad/k%d", i))
		}
		return out
	}
	big := bytes.Repeat([]byte("x"), 60<<10)
	secret := newSecret(t)
	cases := []struct {
		name string
		req  *pb.TxnRequest
		code connect.Code
		says []string
	}{
		{"too many compares", &pb.TxnRequest{Compares: cmps(65), ThenOps: ops(1)},
			connect.CodeResourceExhausted, []string{"65 compares", "limit is 64", "max_txn_compares"}},
		{"too many then ops", &pb.TxnRequest{ThenOps: ops(65)},
			connect.CodeResourceExhausted, []string{"then_ops has 65 operations", "max_txn_ops"}},
		{"too many else ops", &pb.TxnRequest{ThenOps: ops(1), ElseOps: ops(65)},
			connect.CodeResourceExhausted, []string{"else_ops has 65 operations", "max_txn_ops"}},
		{"too many bytes", &pb.TxnRequest{ThenOps: []*pb.TxnOp{
			txnPut("bad/a", big), txnPut("bad/b", big), txnPut("bad/c", big), txnPut("bad/d", big), txnPut("bad/e", big)}},
			connect.CodeResourceExhausted, []string{"307200 bytes", "limit is 262144", "max_txn_bytes"}},
		{"oversize value", &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnPut("bad/a", make([]byte, 64<<10+1))}},
			connect.CodeInvalidArgument, []string{"then_ops[0].put.value is 65537 bytes", "limit is 65536"}},
		{"oversize compare value", &pb.TxnRequest{ThenOps: ops(1), Compares: []*pb.Compare{
			{Key: "bad/a", Op: pb.CompareOp_COMPARE_OP_VALUE_EQUAL, Value: make([]byte, 64<<10+1)}}},
			connect.CodeInvalidArgument, []string{"compares[0].value is 65537 bytes"}},
		{"no ops", &pb.TxnRequest{Compares: cmps(1)},
			connect.CodeInvalidArgument, []string{"no operations"}},
		{"empty key", &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnPut("", nil)}},
			connect.CodeInvalidArgument, []string{"then_ops[0]", "key must not be empty"}},
		{"control character in key", &pb.TxnRequest{ElseOps: []*pb.TxnOp{txnDelete("bad/\x07")}},
			connect.CodeInvalidArgument, []string{"else_ops[0]", "non-printable"}},
		{"key too long", &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnPut(strings.Repeat("k", 257), nil)}},
			connect.CodeInvalidArgument, []string{"257 bytes long", "limit is 256"}},
		{"bad compare key", &pb.TxnRequest{ThenOps: ops(1), Compares: []*pb.Compare{absent("")}},
			connect.CodeInvalidArgument, []string{"compares[0]", "must not be empty"}},
		{"unknown compare op", &pb.TxnRequest{ThenOps: ops(1), Compares: []*pb.Compare{{Key: "bad/a"}}},
			connect.CodeInvalidArgument, []string{"compares[0].op must be one of"}},
		{"value on a version compare", &pb.TxnRequest{ThenOps: ops(1), Compares: []*pb.Compare{
			{Key: "bad/a", Op: pb.CompareOp_COMPARE_OP_VERSION_EQUAL, Value: []byte("v")}}},
			connect.CodeInvalidArgument, []string{"compares[0].value is only for COMPARE_OP_VALUE_EQUAL"}},
		{"op neither put nor delete", &pb.TxnRequest{ThenOps: []*pb.TxnOp{{}}},
			connect.CodeInvalidArgument, []string{"then_ops[0] must be a put or a delete"}},
		{"key twice in a branch", &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnPut("bad/a", nil), txnDelete("bad/a")}},
			connect.CodeInvalidArgument, []string{"then_ops[1]", `"bad/a" a second time`}},
		{"lease id without secret", &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnBoundPut("bad/a", nil, 7, "")}},
			connect.CodeInvalidArgument, []string{"then_ops[0].put has a lease_id but no lease_secret"}},
		{"secret without lease id", &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnBoundPut("bad/a", nil, 0, secret)}},
			connect.CodeInvalidArgument, []string{"lease_secret but no lease_id"}},
		{"malformed secret", &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnBoundPut("bad/a", nil, 7, "nothex")}},
			connect.CodeInvalidArgument, []string{"then_ops[0].put.lease_secret", "32 hex characters"}},
		{"fence without token", &pb.TxnRequest{ThenOps: ops(1), Fence: &pb.Fence{Resource: "r"}},
			connect.CodeInvalidArgument, []string{"fence.token must be set"}},
		{"bad request id", &pb.TxnRequest{ThenOps: ops(1), RequestId: "a\x00b"},
			connect.CodeInvalidArgument, []string{"request_id"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := txn(kv, tc.req)
			wantCode(t, err, tc.code, tc.says...)
		})
	}
	for _, key := range []string{"bad/a", "bad/k0"} {
		if _, err := kvGet(kv, key); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("%s after only refused transactions: %v, want NotFound", key, err)
		}
	}
}

// A bound write (Put or Txn) must prove the lease with its secret
// (FailedPrecondition otherwise) and needs the lease alive (NotFound);
// a stale fence refuses the whole transaction (Aborted). None writes.
func TestTxnBoundAndFencedRefusals(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)
	kv := leaseholdv1connect.NewKVClient(httpClient(t), n.URL)
	held := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"svc/a"}, Ttl: dur(time.Minute)})
	gone := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"svc/b"}, Ttl: dur(time.Minute)})
	mustRelease(t, c, gone)
	id := held.Lease.GetId()
	put := func(req *pb.PutRequest) error {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_, err := kv.Put(ctx, connect.NewRequest(req))
		return err
	}

	err := put(&pb.PutRequest{Key: "alive/a", LeaseId: id, LeaseSecret: newSecret(t)})
	wantCode(t, err, connect.CodeFailedPrecondition, "secret does not match")
	_, err = txn(kv, &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnPut("alive/x", nil), txnBoundPut("alive/a", nil, id, newSecret(t))}})
	wantCode(t, err, connect.CodeFailedPrecondition, "secret does not match")

	err = put(&pb.PutRequest{Key: "alive/a", LeaseId: gone.Lease.GetId(), LeaseSecret: gone.Secret})
	wantCode(t, err, connect.CodeNotFound, "is gone")
	_, err = txn(kv, &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnBoundPut("alive/a", nil, gone.Lease.GetId(), gone.Secret)}})
	wantCode(t, err, connect.CodeNotFound, "is gone")
	err = put(&pb.PutRequest{Key: "alive/a", LeaseSecret: held.Secret})
	wantCode(t, err, connect.CodeInvalidArgument, "lease_secret but no lease_id")

	_, err = txn(kv, &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnPut("alive/x", nil)},
		Fence: &pb.Fence{Resource: "svc/b", Token: gone.Lease.GetToken()}})
	wantCode(t, err, connect.CodeAborted, "stale")

	for _, key := range []string{"alive/a", "alive/x"} {
		if _, err := kvGet(kv, key); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("%s after only refused writes: %v, want NotFound", key, err)
		}
	}

	// The right secret binds, and Get shows the binding.
	if err := put(&pb.PutRequest{Key: "alive/a", Value: []byte("10.0.0.1:80"), LeaseId: id, LeaseSecret: held.Secret}); err != nil {
		t.Fatalf("bound put with the lease's secret: %v", err)
	}
	g, err := kvGet(kv, "alive/a")
	if err != nil || g.LeaseId != id || string(g.Value) != "10.0.0.1:80" {
		t.Fatalf("get alive/a: %v (%v), want bound to lease %d", g, err, id)
	}
	// A bound put with if_version is still a compare-and-set.
	err = put(&pb.PutRequest{Key: "alive/a", IfVersion: new(uint64), LeaseId: id, LeaseSecret: held.Secret})
	wantCode(t, err, connect.CodeAborted, `key "alive/a" exists`)
}
