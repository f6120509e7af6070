package ui_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// The queues view shows each queue's depth, in flight and dead letters; a
// queue's page its deliveries in flight (who holds which key) and its dead
// letters with their last error — never a message body.
func TestDashboardQueues(t *testing.T) {
	n := startAuthNode(t)
	body := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	if status, b := call(t, n, adminTok, "/leasehold.v1.Queues/Create", `{"queue":"orders","settings":{"maxReceives":1}}`, nil); status != http.StatusOK {
		t.Fatalf("create: HTTP %d %s", status, b)
	}
	for _, key := range []string{"customer-42", "customer-7"} {
		if status, b := call(t, n, workerTok, "/leasehold.v1.Queues/Send",
			fmt.Sprintf(`{"queue":"orders","key":%q,"body":%q}`, key, body("secret body of "+key)), nil); status != http.StatusOK {
			t.Fatalf("send: HTTP %d %s", status, b)
		}
	}
	var got struct {
		Deliveries []struct {
			Key      string `json:"key"`
			Sequence uint64 `json:"sequence,string"`
			Token    uint64 `json:"token,string"`
		} `json:"deliveries"`
	}
	if status, b := call(t, n, workerTok, "/leasehold.v1.Queues/Receive", `{"queue":"orders","max":2,"consumer":"billing-1"}`, &got); status != http.StatusOK || len(got.Deliveries) != 2 {
		t.Fatalf("receive: HTTP %d %s", status, b)
	}
	// customer-7's message fails once: with maxReceives 1 it is dead.
	for _, dl := range got.Deliveries {
		if dl.Key == "customer-7" {
			if status, b := call(t, n, workerTok, "/leasehold.v1.Queues/Nack",
				fmt.Sprintf(`{"queue":"orders","sequence":"%d","token":"%d","consumer":"billing-1","error":"card declined"}`, dl.Sequence, dl.Token), nil); status != http.StatusOK {
				t.Fatalf("nack: HTTP %d %s", status, b)
			}
		}
	}

	status, list := get(t, n, operatorTok, "/ui/queues")
	_, row, _ := strings.Cut(list, `href="/ui/queue?name=orders"`)
	row, _, _ = strings.Cut(row, "</tr>")
	// depth 2, in flight 1, dead 1
	if status != http.StatusOK || !strings.Contains(row, `<td class="num">2</td><td class="num">1</td><td class="num"><span class="bad">1</span></td>`) {
		t.Fatalf("the queues view: HTTP %d, the row of orders:\n%s\n\n%s", status, row, list)
	}
	status, q := get(t, n, operatorTok, "/ui/queue?name=orders")
	_, flying, _ := strings.Cut(q, `id="in-flight"`)
	flying, dead, _ := strings.Cut(flying, `id="dead-letters"`)
	if status != http.StatusOK || !strings.Contains(flying, "customer-42") || !strings.Contains(flying, "billing-1") || strings.Contains(flying, "customer-7") {
		t.Fatalf("the queue's deliveries in flight: HTTP %d:\n%s", status, q)
	}
	if !strings.Contains(dead, "customer-7") || !strings.Contains(dead, "card declined") {
		t.Fatalf("the queue's dead letters:\n%s", q)
	}
	for _, page := range []string{list, q} {
		if strings.Contains(page, "secret body") || strings.Contains(page, body("secret body of customer-42")) {
			t.Fatal("a queue page shows a message body")
		}
	}
	if status, b := get(t, n, workerTok, "/ui/queues"); status != http.StatusForbidden || strings.Contains(b, "orders") {
		t.Fatalf("a worker's token on the queues view: HTTP %d", status)
	}
	if status, b := get(t, n, operatorTok, "/ui/queue?name=nope"); status != http.StatusNotFound || !strings.Contains(b, "not_found") {
		t.Fatalf("a queue that does not exist: HTTP %d:\n%.400s", status, b)
	}
}
