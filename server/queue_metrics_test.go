package server_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// Each queue series moves by exactly what happened to its queue, and a
// deleted queue's series go.
func TestQueueMetrics(t *testing.T) {
	n := startNode(t)
	hc := httpClient(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", &pb.QueueSettings{MaxReceives: 1, MaxDepth: 2})
	sendMsg(t, c, "jobs", "a", "m1")
	sendMsg(t, c, "jobs", "b", "m2")
	ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Max: 2})
	if len(ds) != 2 {
		t.Fatalf("received %v", ds)
	}
	if err := ack(c, ctxFor(t, callTimeout), ds[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nack(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesNackRequest{Queue: "jobs",
		Sequence: ds[1].Sequence, Token: ds[1].Token, Error: "boom"})); err != nil { // its only receive: dead
		t.Fatal(err)
	}
	sendMsg(t, c, "jobs", "c", "m3") // depth 2: one queued, one dead
	_, err := c.Send(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs", Key: "d", Body: []byte("m4")}))
	wantCode(t, err, connect.CodeResourceExhausted)

	got := series(scrape(t, hc, n))
	want := map[string]float64{
		"leasehold_queue_sent_total{queue=jobs}":                    3,
		"leasehold_queue_received_total{queue=jobs}":                2,
		"leasehold_queue_redelivered_total{queue=jobs}":             0,
		"leasehold_queue_acked_total{queue=jobs}":                   1,
		"leasehold_queue_nacked_total{queue=jobs}":                  1,
		"leasehold_queue_dead_lettered_total{queue=jobs}":           1,
		"leasehold_queue_refused_total{limit=max_depth,queue=jobs}": 1,
		"leasehold_queue_end_to_end_seconds_count":                  1,
		"leasehold_queue_depth{queue=jobs}":                         2,
		"leasehold_queue_in_flight{queue=jobs}":                     0,
		"leasehold_queue_dead_letters{queue=jobs}":                  1,
		"leasehold_queue_bytes{queue=jobs}":                         4,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if age, ok := got["leasehold_queue_oldest_age_seconds{queue=jobs}"]; !ok || age < 0 {
		t.Errorf("oldest age %v (%v), want a series", age, ok)
	}

	if _, err := c.Delete(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesDeleteRequest{Queue: "jobs", Reason: "test"})); err != nil {
		t.Fatal(err)
	}
	for k := range series(scrape(t, hc, n)) {
		if strings.Contains(k, "queue=jobs") {
			t.Errorf("series %s outlived its queue", k)
		}
	}
}
