package integration

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// A follower passes on the leader's error answers whole: the same status
// and the same leasehold code (Leasehold-Error-Code), by which clients
// tell a lost compare-and-swap (version_mismatch) from a stale token —
// both are Aborted on the wire.
func TestForwardedErrorsKeepTheirCode(t *testing.T) {
	c := testcluster.Start(t, 3)
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	// call asks the node that leads now (or one that does not); an answer
	// that there is no leader (an election on a loaded machine) is not
	// what this test is about: it is asked again, within a bound.
	call := func(leader bool, procedure, body string) (status int, code, retryAfter, answer string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			node := c.WaitLeader(10 * time.Second)
			if !leader {
				node = (node + 1) % 3
			}
			resp, err := hc.Post(c.URL(node)+procedure, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			status, code, retryAfter, answer = resp.StatusCode, resp.Header.Get("Leasehold-Error-Code"), resp.Header.Get("Retry-After"), string(b)
			if code != "unavailable" || time.Now().After(deadline) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	const lead, follower = true, false
	for _, setup := range [][2]string{
		{"/leasehold.v1.KV/Put", `{"key":"fwd/k","value":"MQ=="}`},
		{"/leasehold.v1.Queues/Create", `{"queue":"fwd-q","settings":{"maxDepth":"1"}}`},
		{"/leasehold.v1.Queues/Send", `{"queue":"fwd-q","key":"a","body":"aGVsbG8="}`},
	} {
		if status, _, _, answer := call(lead, setup[0], setup[1]); status != 200 {
			t.Fatalf("%s: %d %s", setup[0], status, answer)
		}
	}
	cases := []struct{ name, procedure, body, want string }{
		{"put if absent on a key that exists", "/leasehold.v1.KV/Put", `{"key":"fwd/k","value":"Mg==","ifVersion":"0"}`, "version_mismatch"},
		{"put at an old version", "/leasehold.v1.KV/Put", `{"key":"fwd/k","value":"Mg==","ifVersion":"1"}`, "version_mismatch"},
		{"release of a lease that does not exist", "/leasehold.v1.Leases/Release", `{"leaseId":"999999","secret":"00112233445566778899aabbccddeeff"}`, "not_found"},
		// Backpressure also carries a Retry-After header.
		{"send past the queue's max depth", "/leasehold.v1.Queues/Send", `{"queue":"fwd-q","key":"b","body":"aGVsbG8="}`, "limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ls, lcode, lretry, lanswer := call(lead, tc.procedure, tc.body)
			if lcode != tc.want {
				t.Fatalf("the leader answers %d with code %q (%s), want code %q", ls, lcode, lanswer, tc.want)
			}
			if tc.want == "limit" && lretry == "" {
				t.Fatalf("the leader's backpressure answer has no Retry-After: %s", lanswer)
			}
			fs, fcode, fretry, fanswer := call(follower, tc.procedure, tc.body)
			if fs != ls || fcode != lcode || fretry != lretry {
				t.Fatalf("through a follower: %d %q Retry-After %q (%s); from the leader: %d %q Retry-After %q (%s)",
					fs, fcode, fretry, fanswer, ls, lcode, lretry, lanswer)
			}
		})
	}

	// The Go client through a follower: a lost compare-and-swap is a
	// version mismatch, not a stale token.
	via := newTestClient(t, time.Second, c.URL((c.WaitLeader(10*time.Second)+1)%3))
	_, err := via.Put(ctxFor(t, 10*time.Second), "fwd/k", []byte("3"), client.IfVersion(0))
	if !errors.Is(err, leasehold.ErrVersionMismatch) {
		t.Fatalf("put if absent through a follower: %v (code %s), want %v", err, leasehold.CodeOf(err), leasehold.ErrVersionMismatch)
	}
}
