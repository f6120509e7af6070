package server_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// The Idempotency service end to end on a real node: one Begin starts an
// attempt, a second with the same payload is told it is in progress, one
// with another payload is refused without showing either, a stale
// attempt cannot complete, and a completed key replays its result.
func TestIdempotencyBeginCompleteReplay(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewIdempotencyClient(httpClient(t), n.URL)
	ctx := ctxFor(t, time.Minute)
	begin := func(fp string, ttl time.Duration) (*pb.IdempotencyBeginResponse, error) {
		r, err := c.Begin(ctx, connect.NewRequest(&pb.IdempotencyBeginRequest{Key: "pay/1",
			Fingerprint: []byte(fp), AttemptTtl: dur(ttl), Owner: "api"}))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	}
	first, err := begin("card=4242;amount=10", 2*time.Second)
	if err != nil || first.State != pb.IdemState_IDEM_STATE_STARTED || first.Token == 0 || first.Secret == "" {
		t.Fatalf("first begin: %+v %v", first, err)
	}
	second, err := begin("card=4242;amount=10", time.Minute)
	if err != nil || second.State != pb.IdemState_IDEM_STATE_IN_PROGRESS || second.OwnerToken != first.Token || second.Secret != "" {
		t.Fatalf("concurrent begin: %+v %v", second, err)
	}
	_, err = begin("card=4242;amount=99", time.Minute)
	wantCode(t, err, connect.CodeFailedPrecondition, "pay/1", "different request")
	if ce := err.(*connect.Error); strings.Contains(ce.Message(), "4242") {
		t.Fatalf("the mismatch message shows a payload: %q", ce.Message())
	}

	// The first attempt lapses; a retry takes over with a larger token.
	var retry *pb.IdempotencyBeginResponse
	eventually(t, 20*time.Second, "the first attempt lapses and a retry starts", func() bool {
		retry, err = begin("card=4242;amount=10", time.Minute)
		return err == nil && retry.State == pb.IdemState_IDEM_STATE_STARTED
	})
	if retry.Token <= first.Token {
		t.Fatalf("retry token %d is not above the lapsed attempt's %d", retry.Token, first.Token)
	}
	_, err = c.Complete(ctx, connect.NewRequest(&pb.IdempotencyCompleteRequest{Key: "pay/1",
		Attempt: first.Attempt, Secret: first.Secret, Result: []byte("stale")}))
	wantCode(t, err, connect.CodeAborted, "no longer owns")
	if _, err := c.Complete(ctx, connect.NewRequest(&pb.IdempotencyCompleteRequest{Key: "pay/1",
		Attempt: retry.Attempt, Secret: retry.Secret, Result: []byte(`{"status":"paid"}`)})); err != nil {
		t.Fatal(err)
	}
	replay, err := begin("card=4242;amount=10", time.Minute)
	if err != nil || replay.State != pb.IdemState_IDEM_STATE_COMPLETED || string(replay.Result) != `{"status":"paid"}` {
		t.Fatalf("replay: %+v %v", replay, err)
	}
	// Each outcome is counted: the lapse on apply, the rest as answered.
	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"leasehold_idem_lapsed_total", nil, 1},
		{"leasehold_idem_begins_total", map[string]string{"outcome": "mismatch"}, 1},
		{"leasehold_idem_begins_total", map[string]string{"outcome": "started"}, 2},
		{"leasehold_idem_replays_total", nil, 1},
		{"leasehold_idem_keys", nil, 1},
		{"leasehold_idem_stored_bytes", nil, float64(len(`{"status":"paid"}`))},
	} {
		if got := counterValue(t, n, m.name, m.labels); got != m.want {
			t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
	got, err := c.Get(ctx, connect.NewRequest(&pb.IdempotencyGetRequest{Key: "pay/1"}))
	if err != nil || got.Msg.Record.ResultSize != uint64(len(`{"status":"paid"}`)) || got.Msg.Record.Token != retry.Token {
		t.Fatalf("get: %+v %v", got, err)
	}
}

// Bad input is refused with InvalidArgument and a message naming the field.
func TestIdempotencyRefusesBadInput(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewIdempotencyClient(httpClient(t), n.URL)
	ctx := ctxFor(t, time.Minute)
	_, err := c.Begin(ctx, connect.NewRequest(&pb.IdempotencyBeginRequest{Key: "k"}))
	wantCode(t, err, connect.CodeInvalidArgument, "fingerprint")
	_, err = c.Begin(ctx, connect.NewRequest(&pb.IdempotencyBeginRequest{Fingerprint: []byte("x")}))
	wantCode(t, err, connect.CodeInvalidArgument, "key")
	_, err = c.Complete(ctx, connect.NewRequest(&pb.IdempotencyCompleteRequest{Key: "k"}))
	wantCode(t, err, connect.CodeInvalidArgument, "attempt")
	_, err = c.Get(ctx, connect.NewRequest(&pb.IdempotencyGetRequest{Key: "never"}))
	wantCode(t, err, connect.CodeNotFound, "not in use")
}
