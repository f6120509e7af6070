package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/procs"
	"github.com/leasehold/leasehold/internal/testutil"
)

// visibility is the consumers' visibility timeout: short, so a paused or
// killed consumer's message comes back quickly; the handlers take
// milliseconds, so a loaded machine does not make it run out by itself.
const visibility = 2 * time.Second

var consumerArgs = []string{"--visibility", visibility.String(), "--concurrency", "4", "--drain", "2s"}

// A consumer SIGSTOPped inside an event's transaction, before its fenced
// write, past its visibility: the event goes to the other consumer, which
// applies it with a larger token; the resumed consumer's write is refused
// by the fence and its nack by the queue (stale token). Every event is
// applied once, in order.
func TestStoppedBeforeTheWriteIsFenced(t *testing.T) {
	e := newEnv(t, 1, client.QueueSettings{MaxReceives: 100})
	mark, arm := marker(t, envStopInTx)
	stopped := e.consumer("stopped", consumerArgs, arm)
	e.consumer("other", consumerArgs)
	ctx := testutil.Context(t, 90*time.Second)
	p := e.produce(ctx, 8, 15, 1)
	order, seq, token := markedDelivery(t, stopped, mark)
	if err := stopped.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	db := e.db()
	testutil.Eventually(t, 30*time.Second, "the other consumer applies the paused consumer's event", func() (bool, error) {
		var n int
		err := db.QueryRow(ctx, `SELECT count(*) FROM order_events WHERE order_id = $1 AND sequence = $2 AND token > $3`,
			order, int64(seq), int64(token)).Scan(&n)
		return n == 1, err
	})
	if err := stopped.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the resumed consumer's fenced write is refused", func() (bool, error) {
		var n int
		err := db.QueryRow(ctx, `SELECT count(*) FROM order_refusals WHERE order_id = $1 AND token = $2 AND reason = 'fence'`,
			order, int64(token)).Scan(&n)
		return n == 1, err
	})
	testutil.Eventually(t, 30*time.Second, "the resumed consumer's nack is refused as stale", func() bool {
		return strings.Contains(stopped.Stderr(), "queue nack refused") && strings.Contains(stopped.Stderr(), "code=stale_token")
	})
	p.wg.Wait()
	e.waitDone(p, 60*time.Second)
}

// A consumer SIGSTOPped after its event committed, before its ack, past
// its visibility: the event goes to the other consumer, which finds it
// applied and only acks it (the key moves on); the resumed consumer's ack
// is refused as stale. The event is in the table once.
func TestStoppedBeforeTheAckIsRefused(t *testing.T) {
	e := newEnv(t, 1, client.QueueSettings{MaxReceives: 100})
	mark, arm := marker(t, envStopAfterCommit)
	stopped := e.consumer("stopped", consumerArgs, arm)
	e.consumer("other", consumerArgs)
	ctx := testutil.Context(t, 90*time.Second)
	p := e.produce(ctx, 8, 15, 1)
	order, seq, _ := markedDelivery(t, stopped, mark)
	if err := stopped.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	db := e.db()
	// The order's next event is applied only after this one was acked:
	// by the other consumer, since this one is stopped.
	testutil.Eventually(t, 30*time.Second, "the order moves on past the paused consumer's event", func() (bool, error) {
		var n int
		err := db.QueryRow(ctx, `SELECT count(*) FROM order_events WHERE order_id = $1 AND sequence > $2`, order, int64(seq)).Scan(&n)
		return n > 0, err
	})
	if err := stopped.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the resumed consumer's ack is refused as stale", func() bool {
		return strings.Contains(stopped.Stderr(), "queue ack refused") && strings.Contains(stopped.Stderr(), "code=stale_token")
	})
	p.wg.Wait()
	e.waitDone(p, 60*time.Second)
}

// Consumers SIGKILLed in the middle of the load, with messages in flight
// and maybe committed but not acked: their messages come back after the
// visibility, a new consumer takes over, and every event is applied once,
// in order.
func TestKilledConsumers(t *testing.T) {
	e := newEnv(t, 1, client.QueueSettings{MaxReceives: 100})
	a := e.consumer("a", consumerArgs)
	b := e.consumer("b", consumerArgs)
	e.consumer("c", consumerArgs)
	ctx := testutil.Context(t, 90*time.Second)
	p := e.produce(ctx, 12, 20, 1)
	db := e.db()
	var applied int
	testutil.Eventually(t, 30*time.Second, "the consumers have applied a third of the events", func() (bool, error) {
		err := db.QueryRow(ctx, `SELECT count(*) FROM order_events`).Scan(&applied)
		return applied >= 12*20/3, err
	})
	for _, k := range []*procs.Proc{a, b} {
		if err := k.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if applied == 12*20 {
		t.Fatal("every event was applied before the kill: the load is too short to test it")
	}
	e.consumer("d", consumerArgs)
	p.wg.Wait()
	t.Logf("events applied: %d of %d at the kill", applied, 12*20)
	e.waitDone(p, 60*time.Second)
}

// The leader of a 3-node cluster is SIGKILLed during the load: producers
// and consumers fail over to the new leader (deliveries in flight are
// redelivered after their visibility, counted from the new leader's
// takeover), and every acknowledged send is applied once, in order.
func TestLeaderKilledDuringLoad(t *testing.T) {
	e := newEnv(t, 3, client.QueueSettings{MaxReceives: 100})
	e.consumer("a", consumerArgs)
	e.consumer("b", consumerArgs)
	old := e.leader()
	ctx := testutil.Context(t, 90*time.Second)
	p := e.produce(ctx, 12, 20, 1)
	testutil.Eventually(t, 30*time.Second, "a quarter of the events are acknowledged", func() bool {
		return p.ackedTotal() >= 12*20/4
	})
	atKill := p.ackedTotal()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	if n := e.leader(); n == old {
		t.Fatalf("%s still leads after its SIGKILL", old.id)
	}
	if atKill == 12*20 {
		t.Fatal("every send was acknowledged before the kill: the load is too short to test it")
	}
	p.wg.Wait()
	t.Logf("sends acknowledged: %d of %d at the kill of %s", atKill, 12*20, old.id)
	e.waitDone(p, 60*time.Second)
}

// A producer faster than its consumer: sends are refused at the queue's
// max_depth with a retry-after hint, the depth never passes it, the serve
// process's memory stays within the budget, and once the producer stops,
// every accepted event is applied once, in order.
func TestBackpressure(t *testing.T) {
	const maxDepth = 400
	e := newEnv(t, 1, client.QueueSettings{MaxReceives: 100, MaxDepth: maxDepth})
	base, err := rss(e.nodes[0].Pid())
	if err != nil {
		t.Skipf("cannot read the node's memory: %v", err)
	}
	e.consumer("slow", []string{"--visibility", "10s", "--concurrency", "2", "--work", "20ms"})
	ctx := testutil.Context(t, 90*time.Second)
	pctx, stop := context.WithTimeout(ctx, 8*time.Second)
	defer stop()
	p := e.produce(pctx, 40, 1000, 25) // far more than the consumer drains in 8s
	var peakDepth int
	var peakRSS int64
	for pctx.Err() == nil {
		q, err := e.c.Queue(ctx, queueName, 0)
		if err != nil {
			t.Fatal(err)
		}
		peakDepth = max(peakDepth, q.Depth)
		r, err := rss(e.nodes[0].Pid())
		if err != nil {
			t.Fatal(err)
		}
		peakRSS = max(peakRSS, r)
		sleep(pctx, 100*time.Millisecond)
	}
	p.wg.Wait()
	if p.refused.Load() == 0 {
		t.Fatalf("no send was refused; %d acknowledged against a max_depth of %d", p.ackedTotal(), maxDepth)
	}
	if hint := time.Duration(p.hint.Load()); hint <= 0 {
		t.Fatalf("refusals carried no retry-after hint")
	}
	if !p.limitNamed.Load() {
		t.Fatal("no refusal named max_depth")
	}
	if peakDepth > maxDepth {
		t.Fatalf("the queue held %d messages, past its max_depth %d", peakDepth, maxDepth)
	}
	// The budget: the queue's bodies are a few hundred KiB; allow the
	// runtime, raft's buffers and the race detector their share.
	const budget = 64 << 20
	if grew := peakRSS - base; grew > budget {
		t.Fatalf("the node grew by %d MiB under load (from %d MiB), past the %d MiB budget", grew>>20, base>>20, budget>>20)
	}
	t.Logf("acknowledged %d sends, refused %d (smallest hint %v); peak depth %d of %d; node RSS %d MiB at rest, %d MiB at peak",
		p.ackedTotal(), p.refused.Load(), time.Duration(p.hint.Load()), peakDepth, maxDepth, base>>20, peakRSS>>20)
	e.waitDone(p, 60*time.Second)
}
