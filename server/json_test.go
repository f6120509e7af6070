package server_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

// jsonUint reads a uint64 that protojson encodes as a decimal string.
func jsonUint(t *testing.T, v any, what string) uint64 {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%s is %T %v, want a decimal string", what, v, v)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("%s is %q, want a positive integer", what, s)
	}
	return n
}

func jsonObj(t *testing.T, v any, what string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is %T %v, want an object", what, v, v)
	}
	return m
}

func jsonDur(t *testing.T, v any, what string) time.Duration {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%s is %T %v, want a duration string", what, v, v)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s is %q: %v", what, s, err)
	}
	return d
}

// TestJSONCurl is the curl example, byte for byte, followed by the
// rest of a lease's life in JSON.
func TestJSONCurl(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	hc := httpClient(t)

	// curl -s -H 'Content-Type: application/json' -d '{"resources":["demo"],"ttl":"10s"}' .../Acquire
	status, body := postJSON(t, hc, n, "/leasehold.v1.Leases/Acquire", `{"resources":["demo"],"ttl":"10s"}`)
	if status != http.StatusOK {
		t.Fatalf("Acquire: status %d, body %v", status, body)
	}
	lease := jsonObj(t, body["lease"], "lease")
	id := jsonUint(t, lease["id"], "lease.id")
	token := jsonUint(t, lease["token"], "lease.token")
	secret, _ := body["secret"].(string)
	if !hex32.MatchString(secret) {
		t.Fatalf("secret is %q, want 32 lowercase hex characters", body["secret"])
	}
	if d := jsonDur(t, body["expiresIn"], "expiresIn"); d <= 0 || d > 10*time.Second {
		t.Fatalf("expiresIn is %v, want (0, 10s]", d)
	}
	if d := jsonDur(t, lease["ttl"], "lease.ttl"); d != 10*time.Second {
		t.Fatalf("lease.ttl is %v, want 10s", d)
	}
	if rs, _ := lease["resources"].([]any); len(rs) != 1 || rs[0] != "demo" {
		t.Fatalf("lease.resources is %v, want [demo]", lease["resources"])
	}
	if _, leaked := lease["secret"]; leaked {
		t.Fatalf("the lease view carries a secret: %v", lease)
	}

	// Held: a second acquire is refused as JSON with a Connect error body.
	status, body = postJSON(t, hc, n, "/leasehold.v1.Leases/Acquire", `{"resources":["demo"],"ttl":"10s"}`)
	if status != http.StatusConflict || body["code"] != "already_exists" {
		t.Fatalf("second Acquire: status %d body %v, want 409 already_exists", status, body)
	}

	// Get shows the holder, without its secret.
	status, body = postJSON(t, hc, n, "/leasehold.v1.Leases/Get", `{"resource":"demo"}`)
	if status != http.StatusOK {
		t.Fatalf("Get: status %d, body %v", status, body)
	}
	holder := jsonObj(t, body["holder"], "holder")
	if got := jsonUint(t, holder["token"], "holder.token"); got != token {
		t.Fatalf("Get: holder token %d, want %d", got, token)
	}
	if _, leaked := holder["secret"]; leaked {
		t.Fatalf("Get shows a secret: %v", body)
	}

	// Renew with progress.
	status, body = postJSON(t, hc, n, "/leasehold.v1.Leases/Renew",
		fmt.Sprintf(`{"leaseId":"%d","secret":%q,"progress":"half done"}`, id, secret))
	if status != http.StatusOK {
		t.Fatalf("Renew: status %d, body %v", status, body)
	}
	rl := jsonObj(t, body["lease"], "renew lease")
	if jsonUint(t, rl["renewCount"], "lease.renewCount") != 1 || rl["progress"] != "half done" {
		t.Fatalf("Renew: lease %v, want renewCount 1 and the progress note", rl)
	}
	if d := jsonDur(t, body["expiresIn"], "renew expiresIn"); d <= 0 || d > 10*time.Second {
		t.Fatalf("Renew: expiresIn %v", d)
	}

	// Renew accepts the snake_case field names too, as protojson does.
	status, body = postJSON(t, hc, n, "/leasehold.v1.Leases/Renew",
		fmt.Sprintf(`{"lease_id":%d,"secret":%q}`, id, secret))
	if status != http.StatusOK {
		t.Fatalf("Renew (snake_case, numeric id): status %d, body %v", status, body)
	}

	// List includes it.
	status, body = postJSON(t, hc, n, "/leasehold.v1.Leases/List", `{}`)
	if status != http.StatusOK {
		t.Fatalf("List: status %d, body %v", status, body)
	}
	leases, _ := body["leases"].([]any)
	if len(leases) != 1 || jsonUint(t, jsonObj(t, leases[0], "leases[0]")["id"], "leases[0].id") != id {
		t.Fatalf("List: %v, want exactly lease %d", body, id)
	}
	if tok, ok := body["nextPageToken"]; ok && tok != "" {
		t.Fatalf("List: nextPageToken %v on the only page", tok)
	}

	// Release, then the resource is free and a second release is NotFound.
	status, body = postJSON(t, hc, n, "/leasehold.v1.Leases/Release",
		fmt.Sprintf(`{"leaseId":"%d","secret":%q}`, id, secret))
	if status != http.StatusOK {
		t.Fatalf("Release: status %d, body %v", status, body)
	}
	if got := jsonUint(t, jsonObj(t, body["lease"], "release lease")["id"], "released id"); got != id {
		t.Fatalf("Release returned lease %d, want %d", got, id)
	}
	status, body = postJSON(t, hc, n, "/leasehold.v1.Leases/Release",
		fmt.Sprintf(`{"leaseId":"%d","secret":%q}`, id, secret))
	if status != http.StatusNotFound || body["code"] != "not_found" {
		t.Fatalf("second Release: status %d body %v, want 404 not_found", status, body)
	}
	status, body = postJSON(t, hc, n, "/leasehold.v1.Leases/Get", `{"resource":"demo"}`)
	if status != http.StatusOK || body["holder"] != nil {
		t.Fatalf("Get after release: status %d body %v, want no holder", status, body)
	}
	status, body = postJSON(t, hc, n, "/leasehold.v1.Leases/List", `{}`)
	if status != http.StatusOK || len(body) != 0 {
		t.Fatalf("List after release: status %d body %v, want {}", status, body)
	}

	// The next grant of demo has a larger token.
	status, body = postJSON(t, hc, n, "/leasehold.v1.Leases/Acquire", `{"resources":["demo"],"ttl":"10s"}`)
	if status != http.StatusOK {
		t.Fatalf("re-Acquire: status %d, body %v", status, body)
	}
	if got := jsonUint(t, jsonObj(t, body["lease"], "lease")["token"], "lease.token"); got <= token {
		t.Fatalf("re-Acquire token %d, want > %d", got, token)
	}
}

// TestGRPCProtocol calls the same handlers over gRPC on cleartext HTTP/2.
func TestGRPCProtocol(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := leaseholdv1connect.NewLeasesClient(h2cClient(t), n.URL, connect.WithGRPC())

	a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"grpc/a"}, Ttl: dur(10 * time.Second), Owner: "grpc-test"})
	if !hex32.MatchString(a.Secret) {
		t.Fatalf("secret %q, want 32 hex characters", a.Secret)
	}
	_, err := acquire(t, c, &pb.AcquireRequest{Resources: []string{"grpc/a"}})
	wantCode(t, err, connect.CodeAlreadyExists, `"grpc/a"`)

	if _, err := renew(c, a.Lease.GetId(), a.Secret); err != nil {
		t.Fatalf("renew over gRPC: %v", err)
	}
	g := get(t, c, "grpc/a")
	if g.GetHolder().GetToken() != a.Lease.GetToken() || g.GetHolder().GetOwner() != "grpc-test" {
		t.Fatalf("Get over gRPC: %v", g)
	}
	ctx := ctxFor(t, callTimeout)
	l, err := c.List(ctx, connect.NewRequest(&pb.ListRequest{}))
	if err != nil || len(l.Msg.GetLeases()) != 1 {
		t.Fatalf("List over gRPC: %v %v", l, err)
	}
	_, err = renew(c, a.Lease.GetId(), newSecret(t))
	wantCode(t, err, connect.CodeFailedPrecondition, "secret")
	mustRelease(t, c, a)
	_, err = renew(c, a.Lease.GetId(), a.Secret)
	wantCode(t, err, connect.CodeNotFound)

	// gRPC-Web over HTTP/1.1 works too.
	web := newClient(t, n, connect.WithGRPCWeb())
	b := mustAcquire(t, web, &pb.AcquireRequest{Resources: []string{"grpc/a"}})
	if b.Lease.GetToken() <= a.Lease.GetToken() {
		t.Fatalf("token %d after %d", b.Lease.GetToken(), a.Lease.GetToken())
	}
	mustRelease(t, web, b)
}
