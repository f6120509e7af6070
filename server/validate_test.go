package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// connectErr turns a raw Connect-protocol error reply into a *connect.Error.
func connectErr(t *testing.T, status int, body map[string]any) error {
	t.Helper()
	if status == http.StatusOK {
		return nil
	}
	code, _ := body["code"].(string)
	var c connect.Code
	if err := c.UnmarshalText([]byte(code)); err != nil {
		t.Fatalf("status %d with body %v: no Connect code", status, body)
	}
	msg, _ := body["message"].(string)
	return connect.NewError(c, errors.New(msg))
}

// invalidUTF8Acquire is a binary AcquireRequest whose one resource name is
// not UTF-8; a Go client cannot build it (proto.Marshal refuses), and JSON
// cannot carry it.
func invalidUTF8Acquire() []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, "bad\xff\xfename")
	return b
}

func TestValidation(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)
	hc := httpClient(t)

	// A live lease, for the checks that need a real id.
	live := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"valid/live"}, Ttl: dur(time.Minute)})

	acq := func(m *pb.AcquireRequest) func(*testing.T) error {
		return func(t *testing.T) error {
			ctx := ctxFor(t, callTimeout)
			_, err := c.Acquire(ctx, connect.NewRequest(m))
			return err
		}
	}
	one := func(m *pb.AcquireRequest) *pb.AcquireRequest {
		if m.Resources == nil {
			m.Resources = []string{"valid/x"}
		}
		return m
	}
	renewReq := func(m *pb.RenewRequest) func(*testing.T) error {
		return func(t *testing.T) error {
			ctx := ctxFor(t, callTimeout)
			_, err := c.Renew(ctx, connect.NewRequest(m))
			return err
		}
	}
	releaseReq := func(m *pb.ReleaseRequest) func(*testing.T) error {
		return func(t *testing.T) error {
			ctx := ctxFor(t, callTimeout)
			_, err := c.Release(ctx, connect.NewRequest(m))
			return err
		}
	}
	listReq := func(m *pb.ListRequest) func(*testing.T) error {
		return func(t *testing.T) error {
			ctx := ctxFor(t, callTimeout)
			_, err := c.List(ctx, connect.NewRequest(m))
			return err
		}
	}
	getReq := func(r string) func(*testing.T) error {
		return func(t *testing.T) error {
			ctx := ctxFor(t, callTimeout)
			_, err := c.Get(ctx, connect.NewRequest(&pb.GetRequest{Resource: r}))
			return err
		}
	}
	jsonAcquire := func(body string) func(*testing.T) error {
		return func(*testing.T) error {
			status, reply := postJSON(t, hc, n, leaseholdv1connect.LeasesAcquireProcedure, body)
			return connectErr(t, status, reply)
		}
	}

	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("valid/many/%d", i)
	}
	secret := newSecret(t)

	cases := []struct {
		name  string
		call  func(*testing.T) error
		code  connect.Code
		words []string // each must appear in the message
	}{
		{"empty resource list", acq(&pb.AcquireRequest{}), connect.CodeInvalidArgument, []string{"resources", "at least one"}},
		{"empty resource name", acq(&pb.AcquireRequest{Resources: []string{""}}), connect.CodeInvalidArgument, []string{"resource name", "empty"}},
		{"10 KB resource name", acq(&pb.AcquireRequest{Resources: []string{strings.Repeat("r", 10<<10)}}), connect.CodeInvalidArgument, []string{"resource name", "10240 bytes", "256"}},
		{"control character in name", acq(&pb.AcquireRequest{Resources: []string{"a\x01b"}}), connect.CodeInvalidArgument, []string{"resource name", "control", "byte 1"}},
		{"newline in name", acq(&pb.AcquireRequest{Resources: []string{"a\nb"}}), connect.CodeInvalidArgument, []string{"resource name", "control"}},
		{"duplicate resource", acq(&pb.AcquireRequest{Resources: []string{"valid/d", "valid/d"}}), connect.CodeInvalidArgument, []string{`"valid/d"`, "twice"}},
		{"65 resources", acq(&pb.AcquireRequest{Resources: many}), connect.CodeInvalidArgument, []string{"resources", "65", "64"}},
		{"1 MB metadata value", acq(one(&pb.AcquireRequest{Metadata: map[string]string{"k": strings.Repeat("v", 1<<20)}})), connect.CodeInvalidArgument, []string{"metadata", "4096"}},
		{"10 MB metadata value: over the body limit", acq(one(&pb.AcquireRequest{Metadata: map[string]string{"k": strings.Repeat("v", 10<<20)}})), connect.CodeResourceExhausted, []string{"max_request_bytes"}},
		{"metadata over 4 KiB in many keys", acq(one(&pb.AcquireRequest{Metadata: bigMetadata()})), connect.CodeInvalidArgument, []string{"metadata", "4096"}},
		{"empty metadata key", acq(one(&pb.AcquireRequest{Metadata: map[string]string{"": "v"}})), connect.CodeInvalidArgument, []string{"metadata key", "empty"}},
		{"owner too long", acq(one(&pb.AcquireRequest{Owner: strings.Repeat("o", 129)})), connect.CodeInvalidArgument, []string{"owner", "128"}},
		{"operation with control character", acq(one(&pb.AcquireRequest{Operation: "op\x7f"})), connect.CodeInvalidArgument, []string{"operation", "control"}},
		{"negative ttl", acq(one(&pb.AcquireRequest{Ttl: dur(-time.Second)})), connect.CodeInvalidArgument, []string{"ttl", "-1s", "100ms"}},
		{"zero ttl (proto)", acq(one(&pb.AcquireRequest{Ttl: dur(0)})), connect.CodeInvalidArgument, []string{"ttl", "0s", "100ms"}},
		{"zero ttl as JSON \"0s\"", jsonAcquire(`{"resources":["valid/x"],"ttl":"0s"}`), connect.CodeInvalidArgument, []string{"ttl", "0s", "100ms"}},
		{"negative ttl as JSON", jsonAcquire(`{"resources":["valid/x"],"ttl":"-10s"}`), connect.CodeInvalidArgument, []string{"ttl", "-10s"}},
		{"ttl under 100ms", acq(one(&pb.AcquireRequest{Ttl: dur(50 * time.Millisecond)})), connect.CodeInvalidArgument, []string{"ttl", "50ms", "100ms"}},
		{"ttl over 1h", acq(one(&pb.AcquireRequest{Ttl: dur(time.Hour + time.Second)})), connect.CodeInvalidArgument, []string{"ttl", "1h0m1s", "1h0m0s"}},
		{"ttl not a valid duration", acq(one(&pb.AcquireRequest{Ttl: &durationpb.Duration{Seconds: 1, Nanos: -5}})), connect.CodeInvalidArgument, []string{"ttl", "not a valid duration"}},
		{"ttl far out of range (JSON)", jsonAcquire(`{"resources":["valid/x"],"ttl":"315576000000s"}`), connect.CodeInvalidArgument, []string{"ttl", "1h0m0s"}},
		{"wait over 1h", acq(one(&pb.AcquireRequest{Wait: dur(2 * time.Hour)})), connect.CodeInvalidArgument, []string{"wait", "2h0m0s", "1h0m0s"}},
		{"negative wait", acq(one(&pb.AcquireRequest{Wait: dur(-time.Second)})), connect.CodeInvalidArgument, []string{"wait", "-1s"}},
		{"lock_delay over 1h", acq(one(&pb.AcquireRequest{LockDelay: dur(2 * time.Hour)})), connect.CodeInvalidArgument, []string{"lock_delay", "1h0m0s"}},
		{"max_hold shorter than ttl", acq(one(&pb.AcquireRequest{Ttl: dur(10 * time.Second), MaxHold: dur(time.Second)})), connect.CodeInvalidArgument, []string{"max_hold", "1s", "shorter than the ttl"}},
		{"max_hold shorter than the default ttl", acq(one(&pb.AcquireRequest{MaxHold: dur(time.Second)})), connect.CodeInvalidArgument, []string{"max_hold", "15s"}},
		{"max_hold over 7 days", acq(one(&pb.AcquireRequest{MaxHold: dur(8 * 24 * time.Hour)})), connect.CodeInvalidArgument, []string{"max_hold", "168h0m0s"}},
		{"semaphore limit over 1000", acq(one(&pb.AcquireRequest{Limit: 1001})), connect.CodeInvalidArgument, []string{"limit is 1001", "1 to 1000 slots"}},
		{"semaphore of two resources", acq(&pb.AcquireRequest{Resources: []string{"valid/a", "valid/b"}, Limit: 2}), connect.CodeInvalidArgument, []string{"names one semaphore, not 2 resources"}},
		{"lock on a semaphore slot's name", func(t *testing.T) error {
			mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"valid/sem"}, Limit: 2, Ttl: dur(time.Minute)})
			return acq(&pb.AcquireRequest{Resources: []string{"valid/sem#1"}})(t)
		}, connect.CodeFailedPrecondition, []string{`"valid/sem#1" is a slot of the semaphore "valid/sem"`}},
		{"secret not hex", acq(one(&pb.AcquireRequest{Secret: strings.Repeat("z", 32)})), connect.CodeInvalidArgument, []string{"secret", "32 hex"}},
		{"secret too short", acq(one(&pb.AcquireRequest{Secret: "abcd"})), connect.CodeInvalidArgument, []string{"secret", "32 hex"}},
		{"secret too long", acq(one(&pb.AcquireRequest{Secret: secret + "00"})), connect.CodeInvalidArgument, []string{"secret", "32 hex"}},
		{"request_id too long", acq(one(&pb.AcquireRequest{RequestId: strings.Repeat("q", 65)})), connect.CodeInvalidArgument, []string{"request_id", "64"}},
		{"renew unknown lease", renewReq(&pb.RenewRequest{LeaseId: 1 << 60, Secret: secret}), connect.CodeNotFound, []string{fmt.Sprint(uint64(1 << 60))}},
		{"release unknown lease", releaseReq(&pb.ReleaseRequest{LeaseId: 1 << 60, Secret: secret}), connect.CodeNotFound, []string{fmt.Sprint(uint64(1 << 60))}},
		{"renew lease_id 0", renewReq(&pb.RenewRequest{Secret: secret}), connect.CodeInvalidArgument, []string{"lease_id"}},
		{"release lease_id 0", releaseReq(&pb.ReleaseRequest{Secret: secret}), connect.CodeInvalidArgument, []string{"lease_id"}},
		{"renew without secret", renewReq(&pb.RenewRequest{LeaseId: live.Lease.GetId()}), connect.CodeInvalidArgument, []string{"secret"}},
		{"renew bad secret format", renewReq(&pb.RenewRequest{LeaseId: live.Lease.GetId(), Secret: "not-hex"}), connect.CodeInvalidArgument, []string{"secret", "32 hex"}},
		{"release bad secret format", releaseReq(&pb.ReleaseRequest{LeaseId: live.Lease.GetId(), Secret: "not-hex"}), connect.CodeInvalidArgument, []string{"secret", "32 hex"}},
		{"renew progress too long", renewReq(&pb.RenewRequest{LeaseId: live.Lease.GetId(), Secret: live.Secret, Progress: strings.Repeat("p", 257)}), connect.CodeInvalidArgument, []string{"progress", "256"}},
		{"page_size 5000", listReq(&pb.ListRequest{PageSize: 5000}), connect.CodeInvalidArgument, []string{"page_size", "5000", "1000"}},
		{"negative page_size", listReq(&pb.ListRequest{PageSize: -1}), connect.CodeInvalidArgument, []string{"page_size"}},
		{"bad page_token", listReq(&pb.ListRequest{PageToken: "bogus"}), connect.CodeInvalidArgument, []string{"page_token"}},
		{"prefix too long", listReq(&pb.ListRequest{Prefix: strings.Repeat("p", 257)}), connect.CodeInvalidArgument, []string{"prefix", "256"}},
		{"get empty resource", getReq(""), connect.CodeInvalidArgument, []string{"resource", "empty"}},
		{"get control character", getReq("x\x00y"), connect.CodeInvalidArgument, []string{"resource", "control"}},
		{"JSON body of the wrong shape", jsonAcquire(`{"resources":"valid/x"}`), connect.CodeInvalidArgument, []string{"unmarshal"}},
		{"JSON duration in the wrong syntax", jsonAcquire(`{"resources":["valid/x"],"ttl":"10m"}`), connect.CodeInvalidArgument, []string{"Duration"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, tc.call(t), tc.code, tc.words...)
		})
	}

	t.Run("invalid UTF-8 resource name (binary protobuf)", func(t *testing.T) {
		status, raw := post(t, hc, n.URL+leaseholdv1connect.LeasesAcquireProcedure, "application/proto", invalidUTF8Acquire())
		var body map[string]any
		if status == http.StatusOK {
			t.Fatalf("granted a lease on a resource name that is not UTF-8")
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("status %d, error body not JSON: %q", status, raw)
		}
		err := connectErr(t, status, body)
		// The protobuf decoder refuses the request before the handler sees it.
		wantCode(t, err, connect.CodeInvalidArgument, "UTF-8")
		t.Logf("reply: %d %v", status, body)
		wantCode(t, err, connect.CodeInvalidArgument, "resource")
	})

	t.Run("invalid UTF-8 in a JSON body", func(t *testing.T) {
		status, raw := post(t, hc, n.URL+leaseholdv1connect.LeasesAcquireProcedure, "application/json",
			[]byte("{\"resources\":[\"bad\xff\xfename\"]}"))
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("status %d, error body not JSON: %q", status, raw)
		}
		wantCode(t, connectErr(t, status, body), connect.CodeInvalidArgument, "UTF-8")
	})

	// Nothing above changed anything: the live lease is intact, the
	// resources named in bad requests are free, and the server still serves.
	g := get(t, c, "valid/live")
	if g.GetHolder().GetId() != live.Lease.GetId() || g.GetHolder().GetRenewCount() != 0 {
		t.Fatalf("after bad input: holder %v", g.GetHolder())
	}
	a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"valid/x", "valid/d"}, Ttl: dur(time.Minute)})
	mustRelease(t, c, a)
	mustRelease(t, c, live)
}

func bigMetadata() map[string]string {
	md := map[string]string{}
	for i := range 100 {
		md[fmt.Sprintf("key-%03d", i)] = strings.Repeat("v", 40)
	}
	return md
}
