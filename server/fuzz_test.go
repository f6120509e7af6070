package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

var fuzzMethods = []struct {
	procedure string
	reply     func() proto.Message
}{
	{leaseholdv1connect.LeasesAcquireProcedure, func() proto.Message { return &pb.AcquireResponse{} }},
	{leaseholdv1connect.LeasesRenewProcedure, func() proto.Message { return &pb.RenewResponse{} }},
	{leaseholdv1connect.LeasesReleaseProcedure, func() proto.Message { return &pb.ReleaseResponse{} }},
	{leaseholdv1connect.LeasesGetProcedure, func() proto.Message { return &pb.GetResponse{} }},
	{leaseholdv1connect.LeasesListProcedure, func() proto.Message { return &pb.ListResponse{} }},
	{leaseholdv1connect.LeasesBatchProcedure, func() proto.Message { return &pb.BatchResponse{} }},
	{leaseholdv1connect.KVTxnProcedure, func() proto.Message { return &pb.TxnResponse{} }},
	{leaseholdv1connect.KVPutProcedure, func() proto.Message { return &pb.PutResponse{} }},
	{leaseholdv1connect.KVListProcedure, func() proto.Message { return &pb.KVListResponse{} }},
}

// fuzzServerTimeout bounds each request on the server (Connect-Timeout-Ms),
// so an input that asks to wait for a held resource costs at most this.
const fuzzServerTimeout = "300"

// FuzzAPI posts arbitrary bodies, as JSON and as binary protobuf, to every
// method of one running node. The node must never answer with a 5xx other
// than unavailable or deadline_exceeded, must answer every request with a
// well-formed reply, and must keep answering.
func FuzzAPI(f *testing.F) {
	n := startNode(f)
	hc := httpClient(f)

	mustProto := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	secret := strings.Repeat("ab", 16)
	const (
		acquireM, renewM, releaseM, getM, listM, batchM = 0, 1, 2, 3, 4, 5
		txnM, putM, kvListM                             = 6, 7, 8
	)
	seeds := []struct {
		method uint8
		binary bool
		body   []byte
	}{
		{acquireM, false, []byte(`{"resources":["demo"],"ttl":"10s"}`)},
		{acquireM, false, []byte(`{"resources":["fz/a","fz/b"],"ttl":"0.2s","wait":"0.1s","owner":"o","operation":"op","metadata":{"k":"v"},"lockDelay":"0.1s","maxHold":"1s","secret":"` + secret + `","requestId":"r1"}`)},
		{acquireM, false, []byte(`{"resources":["demo"],"ttl":"0s"}`)},
		{acquireM, false, []byte(`{"resources":[""],"ttl":"-1s"}`)},
		{acquireM, false, []byte(`{"resources":"demo"}`)},
		{acquireM, false, []byte(`{"resources":["a\u0000b"]}`)},
		{acquireM, false, []byte("{\"resources\":[\"\xff\"]}")},
		{acquireM, false, []byte(`{"ttl":"315576000000s","wait":"-315576000000s"}`)},
		{acquireM, false, []byte(`[]`)},
		{acquireM, false, []byte(`null`)},
		{acquireM, false, []byte(``)},
		{acquireM, false, []byte(`{"resources":["x"],"ttl":{"seconds":1}}`)},
		{renewM, false, []byte(`{"leaseId":"1","secret":"` + secret + `","progress":"p"}`)},
		{renewM, false, []byte(`{"leaseId":"18446744073709551615","secret":"zz"}`)},
		{renewM, false, []byte(`{"leaseId":-1}`)},
		{releaseM, false, []byte(`{"leaseId":"2","secret":"` + secret + `"}`)},
		{releaseM, false, []byte(`{"lease_id":0}`)},
		{getM, false, []byte(`{"resource":"demo"}`)},
		{getM, false, []byte(`{"resource":""}`)},
		{listM, false, []byte(`{}`)},
		{listM, false, []byte(`{"prefix":"fz/","pageSize":1,"pageToken":"3"}`)},
		{listM, false, []byte(`{"pageSize":5000,"pageToken":"x"}`)},
		{acquireM, true, mustProto(&pb.AcquireRequest{Resources: []string{"demo"}, Ttl: durationpb.New(10 * time.Second)})},
		{acquireM, true, mustProto(&pb.AcquireRequest{Resources: []string{"fz/p"}, Ttl: durationpb.New(200 * time.Millisecond),
			Wait: durationpb.New(100 * time.Millisecond), Metadata: map[string]string{"k": "v"}, Secret: secret, RequestId: "r2",
			MaxHold: durationpb.New(time.Second), LockDelay: durationpb.New(100 * time.Millisecond)})},
		{acquireM, true, mustProto(&pb.AcquireRequest{Resources: []string{"x"}, Ttl: &durationpb.Duration{Seconds: -1, Nanos: 5}})},
		{acquireM, true, invalidUTF8Acquire()},
		{acquireM, true, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.BytesType), 1<<40)},
		{acquireM, true, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{renewM, true, mustProto(&pb.RenewRequest{LeaseId: 1, Secret: secret, Progress: "p", RequestId: "r3"})},
		{releaseM, true, mustProto(&pb.ReleaseRequest{LeaseId: 1, Secret: secret})},
		{getM, true, mustProto(&pb.GetRequest{Resource: "demo"})},
		{listM, true, mustProto(&pb.ListRequest{Prefix: "fz/", PageSize: 2})},
		{listM, true, nil},
		{batchM, false, []byte(`{"ops":[{"acquire":{"resources":["fz/b1"],"ttl":"1s"}},{"renew":{"leaseId":"1","secret":"` + secret + `"}},{"release":{"leaseId":"1","secret":"` + secret + `"}},{}]}`)},
		{batchM, false, []byte(`{"ops":[{"acquire":{"resources":["demo"],"wait":"0.1s","secret":"` + secret + `","requestId":"r4"}}]}`)},
		{batchM, false, []byte(`{"ops":[]}`)},
		{batchM, false, []byte(`{"ops":[null]}`)},
		{batchM, false, []byte(`{"ops":[{"acquire":{},"renew":{}}]}`)},
		{batchM, true, mustProto(&pb.BatchRequest{Ops: []*pb.BatchOp{
			{Op: &pb.BatchOp_Acquire{Acquire: &pb.AcquireRequest{Resources: []string{"fz/b2"}, Ttl: durationpb.New(time.Second), RequestId: "r5"}}},
			{Op: &pb.BatchOp_Renew{Renew: &pb.RenewRequest{LeaseId: 1, Secret: secret}}},
			{Op: &pb.BatchOp_Release{Release: &pb.ReleaseRequest{LeaseId: 2, Secret: secret, RequestId: "r5"}}},
			{},
		}})},
		{batchM, true, nil},
		{txnM, false, []byte(`{"compares":[{"key":"fz/k","op":"COMPARE_OP_ABSENT"}],"thenOps":[{"put":{"key":"fz/k","value":"dg=="}}],"elseOps":[{"delete":{"key":"fz/k"}}]}`)},
		{txnM, false, []byte(`{"compares":[{"key":"fz/k","op":"COMPARE_OP_VALUE_EQUAL","value":"dg==","version":"3"}],"thenOps":[{"put":{"key":"fz/k","leaseId":"1","leaseSecret":"` + secret + `"}}],"fence":{"resource":"fz/r","token":"1"}}`)},
		{txnM, false, []byte(`{"compares":[{"key":"fz/k","op":99}],"thenOps":[{}]}`)},
		{txnM, false, []byte(`{"thenOps":[{"put":{"key":"fz/k"},"delete":{"key":"fz/k"}}]}`)},
		{txnM, true, mustProto(&pb.TxnRequest{Compares: []*pb.Compare{{Key: "fz/k", Op: pb.CompareOp_COMPARE_OP_VERSION_LESS, Version: 9}},
			ThenOps: []*pb.TxnOp{{Op: &pb.TxnOp_Put{Put: &pb.TxnPut{Key: "fz/k", Value: []byte("v")}}}},
			ElseOps: []*pb.TxnOp{{Op: &pb.TxnOp_Delete{Delete: &pb.TxnDelete{Key: "fz/k"}}}}, RequestId: "r6"})},
		{putM, false, []byte(`{"key":"fz/b","value":"dg==","leaseId":"1","leaseSecret":"` + secret + `"}`)},
		{putM, false, []byte(`{"key":"fz/b","leaseSecret":"zz"}`)},
		{kvListM, false, []byte(`{"prefix":"fz/","pageSize":1,"pageToken":"fz/a"}`)},
		{kvListM, true, mustProto(&pb.KVListRequest{Prefix: "fz/", PageSize: -1})},
	}
	for _, s := range seeds {
		f.Add(s.method, s.binary, s.body)
	}

	f.Fuzz(func(t *testing.T, method uint8, binary bool, body []byte) {
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		contentType := "application/json"
		if binary {
			contentType = "application/proto"
		}
		status, reply := fuzzPost(t, hc, n.URL+m.procedure, contentType, body)
		if status == http.StatusOK {
			out := m.reply()
			var err error
			if binary {
				err = proto.Unmarshal(reply, out)
			} else {
				err = json.Unmarshal(reply, &map[string]any{})
			}
			if err != nil {
				t.Fatalf("%s: 200 with a reply that does not decode: %v: %q", m.procedure, err, reply)
			}
		} else {
			var e struct{ Code, Message string }
			if err := json.Unmarshal(reply, &e); err != nil || e.Code == "" {
				t.Fatalf("%s: status %d with a reply that is not a Connect error: %q", m.procedure, status, reply)
			}
			if status >= 500 && e.Code != "unavailable" && e.Code != "deadline_exceeded" {
				t.Fatalf("%s: status %d %s: %s (body %q)", m.procedure, status, e.Code, e.Message, body)
			}
			if strings.Contains(e.Message, "internal error") {
				t.Fatalf("%s: internal error for body %q", m.procedure, body)
			}
		}
		// Still answering.
		status, reply = fuzzPost(t, hc, n.URL+leaseholdv1connect.LeasesGetProcedure, "application/json", []byte(`{"resource":"fz/alive"}`))
		if status != http.StatusOK {
			t.Fatalf("after body %q to %s: Get answers %d %q", body, m.procedure, status, reply)
		}
	})
}

func fuzzPost(t *testing.T, hc *http.Client, url, contentType string, body []byte) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Connect-Timeout-Ms", fuzzServerTimeout)
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: the server did not answer: %v", url, err)
	}
	defer res.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		t.Fatalf("POST %s: reading the reply: %v", url, err)
	}
	return res.StatusCode, reply
}
