package cluster

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

// A completed idempotency record is forgotten by a committed entry once
// its retention has run out on the leader's clock, and not before; a new
// leader restarts the countdown from its takeover, so a result is never
// forgotten early.
func TestIdemRetentionForgetsOnTheLeaderClock(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(t, t.TempDir())
	cfg.Clock = fake
	n := openNode(t, cfg)
	ctx := context.Background()
	sec := sha256.Sum256([]byte("attempt secret"))
	r, err := n.Propose(ctx, &fsm.IdemBegin{Key: "pay/1", Fingerprint: sha256.Sum256([]byte("body")),
		Owner: "api", TTL: time.Minute, Retention: time.Hour, SecretHash: sec})
	if err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	r, err = n.Propose(ctx, &fsm.IdemComplete{Key: "pay/1", LeaseID: r.Idem().Token, SecretHash: sec, Result: []byte("ok")})
	if err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	fake.Advance(50 * time.Minute) // 10 minutes left on this leader
	if !hasIdem(t, n, "pay/1") {
		t.Fatal("the result was forgotten before its retention")
	}
	n.Close()

	n2 := openNode(t, cfg) // takes over at the fake clock's "now"
	defer n2.Close()
	fake.Advance(30 * time.Minute) // past the old leader's deadline
	if !hasIdem(t, n2, "pay/1") {
		t.Fatal("the result was forgotten on the old leader's schedule")
	}
	fake.Advance(31 * time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for hasIdem(t, n2, "pay/1") {
		if time.Now().After(deadline) {
			t.Fatal("the result outlived its retention on the new leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hasIdem(t *testing.T, n *Node, key string) bool {
	t.Helper()
	var ok bool
	if err := n.Read(context.Background(), func(s *fsm.State) { _, ok = s.IdemGet(key) }); err != nil {
		t.Fatal(err)
	}
	return ok
}
