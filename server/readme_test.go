package server_test

import (
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// spliced is a shell variable spliced into a single-quoted word: '...'$id'...'.
var spliced = regexp.MustCompile(`'(\$[a-z]+)'`)

// docBody returns the JSON body of the first `curl -d '...'` in doc (a
// path from the repository's root: README.md, docs/queues.md) after the
// text after, with each variable the shell splices in left as $name for
// the test to fill in.
func docBody(t *testing.T, doc, after string) string {
	t.Helper()
	raw, err := os.ReadFile("../" + doc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), after)
	if !ok {
		t.Fatalf("%s no longer has %q", doc, after)
	}
	_, rest, ok = strings.Cut(rest, "-d '")
	rest = spliced.ReplaceAllString(rest, "$1")
	body, _, ok2 := strings.Cut(rest, "'")
	if !ok || !ok2 {
		t.Fatalf("%s: no curl -d '...' after %q", doc, after)
	}
	return body
}

// The README's Batch example runs as documented, through the real JSON
// handler: a grant, a place in line, and a not_found for a lease that is
// gone; then the documented follow-up to Acquire waits for that place and
// gets the grant.
func TestReadmeBatchExample(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)
	hc := httpClient(t)

	// The quickstart released lease 4 before this example: stand in a lease
	// that is gone for it, with its real secret.
	gone := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"demo"}, Ttl: dur(10 * time.Second)})
	mustRelease(t, c, gone)
	body := docBody(t, "README.md", "# several acquires, renewals and releases in one request")
	for placeholder, real := range map[string]string{"$id": strconv.FormatUint(gone.Lease.GetId(), 10), "$secret": gone.Secret} {
		if !strings.Contains(body, placeholder) {
			t.Fatalf("the README's Batch body %s no longer has %s", body, placeholder)
		}
		body = strings.ReplaceAll(body, placeholder, real)
	}
	status, out := postJSON(t, hc, n, leaseholdv1connect.LeasesBatchProcedure, body)
	if status != 200 {
		t.Fatalf("the README's Batch example: status %d: %v", status, out)
	}
	results, _ := out["results"].([]any)
	if len(results) != 3 {
		t.Fatalf("the README's Batch example: %v, want 3 results", out)
	}
	first := jsonObj(t, jsonObj(t, results[0], "results[0]")["acquire"], "results[0].acquire")
	if first["lease"] == nil || first["secret"] == nil {
		t.Fatalf("results[0]: %v, want a grant", results[0])
	}
	if q := jsonObj(t, results[1], "results[1]")["queued"]; q != true {
		t.Fatalf("results[1]: %v, want queued", results[1])
	}
	e := jsonObj(t, jsonObj(t, results[2], "results[2]")["error"], "results[2].error")
	if e["code"] != "not_found" || e["message"] == "" {
		t.Fatalf("results[2]: %v, want a not_found error", results[2])
	}

	// The documented follow-up waits for the place; releasing the first
	// grant hands "b" to it.
	type reply struct {
		status int
		body   []byte
		err    error
	}
	done := make(chan reply, 1)
	follow := docBody(t, "README.md", "# wait for the queued one")
	go func() {
		res, err := hc.Post(n.URL+leaseholdv1connect.LeasesAcquireProcedure, "application/json", strings.NewReader(follow))
		if err != nil {
			done <- reply{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		done <- reply{res.StatusCode, b, err}
	}()
	lease := jsonObj(t, first["lease"], "lease")
	if err := release(c, jsonUint(t, lease["id"], "id"), first["secret"].(string)); err != nil {
		t.Fatalf("release the batch's first grant: %v", err)
	}
	select {
	case r := <-done:
		var out map[string]any
		if r.err == nil {
			r.err = json.Unmarshal(r.body, &out)
		}
		if r.err != nil || r.status != 200 || out["lease"] == nil {
			t.Fatalf("the README's follow-up Acquire: status %d: %s (%v), want the grant", r.status, r.body, r.err)
		}
	case <-time.After(callTimeout):
		t.Fatal("the README's follow-up Acquire was not granted")
	}
	if g := get(t, c, "b"); g.GetHolder() == nil || len(g.GetWaiters()) != 0 {
		t.Fatalf("b after the follow-up: %v, want held and nobody waiting", g)
	}
}
