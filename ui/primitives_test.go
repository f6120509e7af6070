package ui_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
)

// The elections view shows who leads with which value and term; the
// idempotency view shows a key's state, owner and result size, never the
// result.
func TestDashboardElectionsAndIdempotencyKeys(t *testing.T) {
	n := startAuthNode(t)
	var camp struct {
		Lease struct {
			Token uint64 `json:"token,string"`
		} `json:"lease"`
	}
	if status, body := call(t, n, workerTok, "/leasehold.v1.Elections/Campaign",
		`{"election":"sched/primary","value":"10.0.0.7:9000","ttl":"30s","owner":"sched-a"}`, &camp); status != http.StatusOK {
		t.Fatalf("campaign: HTTP %d %s", status, body)
	}
	status, body := get(t, n, operatorTok, "/ui/elections")
	if status != http.StatusOK {
		t.Fatalf("elections: HTTP %d", status)
	}
	for _, want := range []string{"sched/primary", "10.0.0.7:9000", "sched-a", fmt.Sprintf(">%d</td>", camp.Lease.Token)} {
		if !strings.Contains(body, want) {
			t.Errorf("the elections view lacks %q:\n%s", want, body)
		}
	}
	if _, body := get(t, n, operatorTok, "/ui/elections?prefix=other/"); strings.Contains(body, "sched/primary") {
		t.Error("the elections view ignores its prefix")
	}
	// The term's age and its renewal health, not "Expires in —".
	if !regexp.MustCompile(`class="term-age">\d`).MatchString(body) || !strings.Contains(body, "ok: not renewed yet") || strings.Contains(body, "Expires in") {
		t.Errorf("the elections view lacks the term's age and health:\n%s", body)
	}
	// A leader that stops renewing shows as overdue past half its TTL.
	if status, body := call(t, n, workerTok, "/leasehold.v1.Elections/Campaign",
		`{"election":"sched/stale","value":"x","ttl":"6s","owner":"sched-b"}`, nil); status != http.StatusOK {
		t.Fatalf("campaign: HTTP %d %s", status, body)
	}
	testutil.Eventually(t, 10*time.Second, "the stale leader shows as overdue", func() (bool, string) {
		_, rows := get(t, n, operatorTok, "/ui/elections/rows?prefix=sched/stale")
		return strings.Contains(rows, "renewal overdue: not renewed yet"), rows
	})

	const secret = "1de05ec41de05ec41de05ec41de05ec4"
	result := "payment 8e03 captured"
	var begin struct {
		Attempt uint64 `json:"attempt,string"`
	}
	if status, body := call(t, n, workerTok, "/leasehold.v1.Idempotency/Begin",
		fmt.Sprintf(`{"key":"pay/8e03","fingerprint":"YW1vdW50PTEw","attemptTtl":"30s","owner":"payments-1","secret":%q}`, secret), &begin); status != http.StatusOK {
		t.Fatalf("begin: HTTP %d %s", status, body)
	}
	if status, body := call(t, n, workerTok, "/leasehold.v1.Idempotency/Complete", fmt.Sprintf(`{"key":"pay/8e03","attempt":"%d","secret":%q,"result":%q}`,
		begin.Attempt, secret, base64.StdEncoding.EncodeToString([]byte(result))), nil); status != http.StatusOK {
		t.Fatalf("complete: HTTP %d %s", status, body)
	}
	_, body = get(t, n, operatorTok, "/ui/idempotency?prefix=pay/")
	for _, want := range []string{"pay/8e03", "completed", "payments-1", fmt.Sprintf("%d bytes", len(result))} {
		if !strings.Contains(body, want) {
			t.Errorf("the idempotency view lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, result) || strings.Contains(body, base64.StdEncoding.EncodeToString([]byte(result))) {
		t.Error("the idempotency view shows the stored result")
	}
}
