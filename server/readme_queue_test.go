package server_test

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// The README's keyed-queue examples run as documented, through the real
// JSON handlers: create, send, a receive that gets the message with its
// token, and an ack with that sequence and token.
func TestReadmeQueueExample(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	hc := httpClient(t)
	call := func(after, procedure string, replace ...string) map[string]any {
		t.Helper()
		body := readmeBody(t, after)
		r := strings.NewReplacer(replace...)
		status, out := postJSON(t, hc, n, procedure, r.Replace(body))
		if status != 200 {
			t.Fatalf("the README's %s example %s: status %d: %v", procedure, body, status, out)
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
		`"sequence":"1"`, `"sequence":"`+seq+`"`, `"token":"7"`, `"token":"`+token+`"`)
}
