package server_test

import (
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// A JSON field the request does not have is refused with a message that
// names it, on every method: a misspelt "tll" must not quietly give the
// default TTL.
func TestJSONUnknownFieldRefused(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	hc := httpClient(t)

	files := []protoreflect.FileDescriptor{pb.File_leasehold_v1_leases_proto, pb.File_leasehold_v1_kv_proto,
		pb.File_leasehold_v1_admin_proto, pb.File_leasehold_v1_cluster_proto, pb.File_leasehold_v1_queues_proto}
	methods := 0
	for _, f := range files {
		for i := range f.Services().Len() {
			svc := f.Services().Get(i)
			for j := range svc.Methods().Len() {
				proc := "/" + string(svc.FullName()) + "/" + string(svc.Methods().Get(j).Name())
				methods++
				status, body := postJSON(t, hc, n, proc, `{"notAField":1}`)
				wantJSONInvalid(t, proc, status, body, `unknown field "notAField"`)
			}
		}
	}
	if methods < 10 {
		t.Fatalf("found only %d methods in the API descriptors", methods)
	}

	// The case, plain and inside a batch.
	status, body := postJSON(t, hc, n, "/leasehold.v1.Leases/Acquire", `{"resources":["unknown/tll"],"tll":"3600s"}`)
	wantJSONInvalid(t, "Acquire", status, body, `unknown field "tll"`)
	status, body = postJSON(t, hc, n, "/leasehold.v1.Leases/Batch", `{"ops":[{"acquire":{"resources":["unknown/tll"],"tll":"3600s"}}]}`)
	wantJSONInvalid(t, "Batch", status, body, `unknown field "tll"`)
	if g := get(t, newClient(t, n), "unknown/tll"); g.GetHolder() != nil {
		t.Fatalf("a refused request acquired the resource: %v", g.GetHolder())
	}
	// Both spellings protojson accepts still work.
	for _, req := range []string{`{"resources":["unknown/ok1"],"ttl":"20s","lockDelay":"1s"}`,
		`{"resources":["unknown/ok2"],"ttl":"20s","lock_delay":"1s"}`} {
		if status, body := postJSON(t, hc, n, "/leasehold.v1.Leases/Acquire", req); status != http.StatusOK {
			t.Fatalf("Acquire %s: status %d %v", req, status, body)
		}
	}
	// So does the charset form of the content type.
	status, raw := post(t, hc, n.URL+"/leasehold.v1.Leases/Acquire", "application/json; charset=utf-8", []byte(`{"resources":["x"],"tll":"1s"}`))
	if status != http.StatusBadRequest || !strings.Contains(string(raw), `unknown field \"tll\"`) {
		t.Fatalf("charset=utf-8: status %d %s", status, raw)
	}
}

func wantJSONInvalid(t *testing.T, what string, status int, body map[string]any, substr string) {
	t.Helper()
	msg, _ := body["message"].(string)
	if status != http.StatusBadRequest || body["code"] != "invalid_argument" || !strings.Contains(msg, substr) {
		t.Fatalf("%s: status %d %v, want 400 invalid_argument mentioning %s", what, status, body, substr)
	}
}
