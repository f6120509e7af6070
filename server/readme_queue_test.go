package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// docs/queues.md's keyed-queue examples run as documented, through the real
// JSON handlers: create, send, a receive that gets the message with its
// token, an ack with that sequence and token, and a purge whose retry
// (the same requestId) answers the first's count and drops nothing sent
// since.
func TestReadmeQueueExample(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	hc := httpClient(t)
	call := func(after, procedure string, replace ...string) map[string]any {
		t.Helper()
		body := docBody(t, "docs/queues.md", after)
		r := strings.NewReplacer(replace...)
		status, out := postJSON(t, hc, n, procedure, r.Replace(body))
		if status != 200 {
			t.Fatalf("docs/queues.md's %s example %s: status %d: %v", procedure, body, status, out)
		}
		return out
	}
	call("# create a queue (admin)", leaseholdv1connect.QueuesCreateProcedure)
	sent := call("# send (body is bytes", leaseholdv1connect.QueuesSendProcedure)
	seq, _ := sent["sequence"].(string)
	if seq == "" {
		t.Fatalf("send answered %v, want a sequence", sent)
	}
	got := call("# receive up to 10", leaseholdv1connect.QueuesReceiveProcedure)
	ds, _ := got["deliveries"].([]any)
	if len(ds) != 1 {
		t.Fatalf("receive answered %v, want the message", got)
	}
	d := jsonObj(t, ds[0], "deliveries[0]")
	if d["sequence"] != seq || d["body"] != "aGVsbG8=" || d["key"] != "customer-42" {
		t.Fatalf("delivery %v, want sequence %s of customer-42", d, seq)
	}
	token, _ := d["token"].(string)
	call("# ack with the delivery's sequence and token", leaseholdv1connect.QueuesAckProcedure,
		"$seq", seq, "$token", token)

	call("# a second message", leaseholdv1connect.QueuesSendProcedure)
	for attempt := range 2 {
		purged := call("# purge (admin, a reason is required)", leaseholdv1connect.QueuesPurgeProcedure)
		if purged["dropped"] != "1" {
			t.Fatalf("purge attempt %d answered %v, want docs/queues.md's {\"dropped\":\"1\"}", attempt+1, purged)
		}
		call("# send (body is bytes", leaseholdv1connect.QueuesSendProcedure, `"dedupId":"order-1001"`, fmt.Sprintf(`"dedupId":"order-%d"`, 1003+attempt))
	}
	status, info := postJSON(t, hc, n, leaseholdv1connect.QueuesGetProcedure, `{"queue":"orders"}`)
	if q := jsonObj(t, info["queue"], "queue"); status != 200 || q["depth"] != "2" {
		t.Fatalf("after a purge and its retry: %d %v, want the messages sent after the first purge kept (depth 2)", status, q)
	}
}
