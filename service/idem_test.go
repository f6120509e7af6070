package service_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/service"
)

// A Begin that waits on a key held by another attempt is woken by that
// attempt's Complete (its lease's Released event in the node's watch hub),
// not by a poll: with the fallback poll made a minute long, the waiter
// still answers "completed" within seconds.
func TestIdemWaiterWokenByCompletion(t *testing.T) {
	service.SetIdemFallbackPoll(t, time.Minute)
	n := startWatchNode(t, service.HubConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fp, sec := sha256.Sum256([]byte("body")), sha256.Sum256([]byte("first attempt"))
	begin := func(sec [32]byte, wait time.Duration) (service.Result, error) {
		return n.svc.IdemBegin(ctx, &service.IdemBegin{Key: "pay/wake", Fingerprint: fp, Owner: "t",
			TTL: time.Minute, SecretHash: sec}, wait)
	}
	first, err := begin(sec, 0)
	if err != nil || first.Err != nil || first.Idem().State != fsm.IdemStarted {
		t.Fatalf("first Begin: %+v %v", first, err)
	}
	applied := n.hub.Stats().Applied
	type answer struct {
		res service.Result
		err error
	}
	waiter := make(chan answer, 1)
	go func() {
		r, err := begin(sha256.Sum256([]byte("the waiter")), 20*time.Second)
		waiter <- answer{r, err}
	}()
	// The waiter's Begin is a log entry: once applied, it has been told
	// "in progress" and waits (or is about to, reading the key first).
	deadline := time.Now().Add(10 * time.Second)
	for n.hub.Stats().Applied <= applied {
		if time.Now().After(deadline) {
			t.Fatal("the waiter's Begin was not applied within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	done, err := n.svc.IdemComplete(ctx, &service.IdemComplete{Key: "pay/wake", LeaseID: first.Idem().Token,
		SecretHash: sec, Result: []byte("ok")})
	if err != nil || done.Err != nil {
		t.Fatalf("Complete: %v %v", err, done.Err)
	}
	completed := time.Now()
	select {
	case a := <-waiter:
		if a.err != nil || a.res.Err != nil || a.res.Idem().State != fsm.IdemCompleted || string(a.res.Idem().Result) != "ok" {
			t.Fatalf("the waiter's answer: %+v %v", a.res, a.err)
		}
		t.Logf("the waiter answered %v after the Complete", time.Since(completed))
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the Complete within 10s (the fallback poll is a minute)")
	}
}
