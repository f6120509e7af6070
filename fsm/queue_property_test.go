package fsm

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A model test of keyed queues: random Send (single and batched, with
// dedup ids), Receive (with request ids, retried), Ack, Nack, Extend (by
// the delivery's consumer, unbound, or by another consumer), visibility
// expiry, dead letters, Redrive, retries of a Nack or Redrive with its
// request ID (at any later step: answered as the first, acting no more)
// and snapshot/restore, against a model of per-key lists. Every
// answer is the one the model predicts, and the properties are
// checked directly: a key's message is delivered only while it is the
// key's head and nothing of the key is in flight, and acked only then; a
// delivery's token is above every earlier token of its key; a dedup id
// never enqueues twice; stale acks, nacks and extends are refused, and so
// are another consumer's; a retried Receive answers exactly its first
// attempt's deliveries still in flight, and hands out nothing new; and in
// the end every accepted message is delivered and acked exactly once,
// unless its retention ran out first.

type mQMsg struct {
	seq      uint64
	sentAt   int64
	receives uint32
	notReady int64
}

type mQKey struct {
	msgs    []mQMsg // send order; msgs[0] is the head
	token   uint64  // the head's delivery in flight (0: none)
	blocked bool
}

type mQDelivery struct {
	key   string
	seq   uint64
	token uint64
}

type mQDead struct {
	key string
	msg mQMsg
}

func TestQueueModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const maxReceives, maxDepth = 3, 12
		mode := rapid.SampledFrom([]DeadLetterMode{DeadLetterSkip, DeadLetterBlock}).Draw(rt, "mode")
		timed := newTimedObserver()
		s := New(DefaultConfig(), timed)
		var capt capturing
		defer capt.done(rt)
		ix, now := uint64(0), t0
		apply := func(c Command) Result { // at the step's time, now
			ix++
			return s.Apply(ix, &Batch{Time: now, Cmds: []Command{c}})[0]
		}
		set := QueueSettings{MaxReceives: maxReceives, MaxDepth: maxDepth, DedupWindow: time.Hour, DeadLetter: mode}
		if r := apply(&QueueCreate{Queue: "q", Settings: set}); r.Err != nil {
			rt.Fatal(r.Err)
		}
		keys := map[string]*mQKey{}
		var dead []mQDead
		var history []mQDelivery         // every delivery handed out, stale ones too
		lastToken := map[string]uint64{} // per key, the newest delivery token
		dedup := map[string]uint64{}     // dedup id -> first seq
		sent := map[uint64]string{}      // accepted seq -> key
		acked := map[uint64]bool{}
		nextSeq := uint64(1)
		receipts := map[string][]mQDelivery{} // request id -> what that Receive handed out
		type pastCall struct {
			cmd   Command
			moved int // a Redrive's answer
		}
		var retriable []pastCall // Nacks and Redrives with a request id that succeeded
		depth := func() int {
			n := len(dead)
			for _, k := range keys {
				n += len(k.msgs)
			}
			return n
		}
		keyOf := func(name string) *mQKey {
			if keys[name] == nil {
				keys[name] = &mQKey{}
			}
			return keys[name]
		}
		// current says whether d is the delivery in flight of its key.
		current := func(d mQDelivery) bool {
			k := keys[d.key]
			return k != nil && k.token == d.token && k.token != 0 && k.msgs[0].seq == d.seq
		}
		// requeue is a nack or an expiry in the model.
		requeue := func(d mQDelivery, delay time.Duration) {
			k := keys[d.key]
			k.token = 0
			if k.msgs[0].receives >= maxReceives {
				dead = append(dead, mQDead{d.key, k.msgs[0]})
				k.msgs = k.msgs[1:]
				k.blocked = mode == DeadLetterBlock
				return
			}
			k.msgs[0].notReady = now + int64(delay)
		}
		deliver := func(ds []Delivery) {
			for _, d := range ds {
				k := keys[d.Key]
				if k == nil || len(k.msgs) == 0 || k.msgs[0].seq != d.Sequence {
					rt.Fatalf("delivered %d of key %q, which is not its head", d.Sequence, d.Key)
				}
				if k.token != 0 || k.blocked {
					rt.Fatalf("delivered %d of key %q while the key is in flight or blocked", d.Sequence, d.Key)
				}
				if d.Token <= lastToken[d.Key] {
					rt.Fatalf("key %q got token %d after token %d", d.Key, d.Token, lastToken[d.Key])
				}
				lastToken[d.Key] = d.Token
				k.token = d.Token
				k.msgs[0].receives++
				if d.Receives != int(k.msgs[0].receives) {
					rt.Fatalf("delivery of %d says %d receives, want %d", d.Sequence, d.Receives, k.msgs[0].receives)
				}
				history = append(history, mQDelivery{d.Key, d.Sequence, d.Token})
			}
		}
		// expectReceive is the model's pick: ready heads, oldest first.
		expectReceive := func(max int) []uint64 {
			type cand struct {
				notReady int64
				seq      uint64
			}
			var cs []cand
			for _, k := range keys {
				if len(k.msgs) > 0 && k.token == 0 && !k.blocked && k.msgs[0].notReady <= now {
					cs = append(cs, cand{k.msgs[0].notReady, k.msgs[0].seq})
				}
			}
			sort.Slice(cs, func(i, j int) bool {
				if cs[i].notReady != cs[j].notReady {
					return cs[i].notReady < cs[j].notReady
				}
				return cs[i].seq < cs[j].seq
			})
			var out []uint64
			for _, c := range cs[:min(max, len(cs))] {
				out = append(out, c.seq)
			}
			return out
		}
		pick := func() (mQDelivery, bool) {
			if len(history) == 0 {
				return mQDelivery{}, false
			}
			return rapid.SampledFrom(history).Draw(rt, "delivery"), true
		}
		// settler draws who settles: unbound (an old entry), the
		// delivery's consumer, or another one (refused, changing nothing).
		settler := func() (Settler, bool) {
			switch rapid.IntRange(0, 2).Draw(rt, "settler") {
			case 0:
				return Settler{}, true
			case 1:
				return Settler{Bound: true}, true // the receives' consumer is ""
			}
			return Settler{Consumer: "intruder/w1", Bound: true}, false
		}
		refused := func(what string, d mQDelivery, r Result, own bool) bool {
			if !current(d) {
				wantQueueCode(rt, "a stale "+what, r, leasehold.CodeStaleToken)
				return true
			}
			if !own {
				wantQueueCode(rt, what+" by another consumer", r, leasehold.CodePermission)
				return true
			}
			return false
		}
		ackBy := func(d mQDelivery, by Settler, own bool) {
			r := apply(&QueueAck{RequestID: "", Queue: "q", Seq: d.seq, Token: d.token, Settler: by})
			if refused("ack", d, r, own) {
				return
			}
			if r.Err != nil {
				rt.Fatalf("ack of current delivery %+v: %v", d, r.Err)
			}
			if acked[d.seq] {
				rt.Fatalf("message %d acked twice", d.seq)
			}
			acked[d.seq] = true
			k := keys[d.key]
			k.msgs, k.token = k.msgs[1:], 0
		}
		ack := func(d mQDelivery) { ackBy(d, Settler{}, true) }
		steps := rapid.IntRange(1, 120).Draw(rt, "steps")
		for range steps {
			now += int64(time.Second)
			switch rapid.IntRange(0, 11).Draw(rt, "op") {
			case 0, 1: // Send a batch of 1 to 3
				n := rapid.IntRange(1, 3).Draw(rt, "n")
				msgs := make([]QueueMessage, n)
				adds, seen := 0, map[string]bool{}
				for i := range msgs {
					msgs[i] = QueueMessage{Key: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "key"),
						Body:    []byte("m"),
						DedupID: rapid.SampledFrom([]string{"", "", "d1", "d2", "d3", "d4", "d5", "d6"}).Draw(rt, "dedup")}
					if _, dup := dedup[msgs[i].DedupID]; (!dup && !seen[msgs[i].DedupID]) || msgs[i].DedupID == "" {
						adds++
					}
					seen[msgs[i].DedupID] = msgs[i].DedupID != ""
				}
				r := apply(&QueueSend{Queue: "q", Messages: msgs})
				if depth()+adds > maxDepth {
					wantQueueCode(rt, "a send past max_depth", r, leasehold.CodeLimit)
					break
				}
				if r.Err != nil {
					rt.Fatalf("send: %v", r.Err)
				}
				for i, m := range msgs {
					if first, dup := dedup[m.DedupID]; dup && m.DedupID != "" {
						if !r.Queue().Duplicate[i] || r.Queue().Seqs[i] != first {
							rt.Fatalf("dedup id %q sent again: seq %d dup %v, want the first seq %d", m.DedupID, r.Queue().Seqs[i], r.Queue().Duplicate[i], first)
						}
						continue
					}
					if r.Queue().Duplicate[i] || r.Queue().Seqs[i] != nextSeq {
						rt.Fatalf("message %d got seq %d (dup %v), want %d", i, r.Queue().Seqs[i], r.Queue().Duplicate[i], nextSeq)
					}
					if m.DedupID != "" {
						dedup[m.DedupID] = nextSeq
					}
					sent[nextSeq] = m.Key
					k := keyOf(m.Key)
					k.msgs = append(k.msgs, mQMsg{seq: nextSeq, sentAt: now, notReady: now})
					nextSeq++
				}
			case 2, 3: // Receive, maybe with a request id, maybe a retry
				max := rapid.IntRange(1, 3).Draw(rt, "max")
				id := rapid.SampledFrom([]string{"", "r1", "r2"}).Draw(rt, "request id")
				var live []uint64 // the first attempt's deliveries still in flight
				if id != "" {
					for _, d := range receipts[id] {
						if current(d) {
							live = append(live, d.seq)
						}
					}
					slices.Sort(live)
				}
				want := expectReceive(max)
				r := apply(&QueueReceive{Queue: "q", Max: max, RequestID: id})
				var got []uint64
				for _, d := range r.Queue().Deliveries {
					got = append(got, d.Sequence)
				}
				if len(live) > 0 { // a retry: the same deliveries, nothing new
					if !r.Dup || !slices.Equal(got, live) {
						rt.Fatalf("receive retried with %q answered %v (dup %v), want the first's still in flight %v", id, got, r.Dup, live)
					}
					for _, d := range r.Queue().Deliveries {
						if k := keys[d.Key]; k.token != d.Token {
							rt.Fatalf("a retry answered token %d for key %q, whose delivery has token %d", d.Token, d.Key, k.token)
						}
					}
					break
				}
				if !slices.Equal(got, want) {
					rt.Fatalf("receive %d delivered %v, want %v", max, got, want)
				}
				deliver(r.Queue().Deliveries)
				if id != "" && len(r.Queue().Deliveries) > 0 {
					receipts[id] = history[len(history)-len(r.Queue().Deliveries):]
				}
			case 4: // Ack, maybe stale, maybe by another consumer
				if d, ok := pick(); ok {
					by, own := settler()
					ackBy(d, by, own)
				}
			case 5: // Nack, maybe stale
				if d, ok := pick(); ok {
					delay := rapid.SampledFrom([]time.Duration{0, 5 * time.Second}).Draw(rt, "delay")
					by, own := settler()
					nack := &QueueNack{Queue: "q", Seq: d.seq, Token: d.token, Delay: delay, Note: "failed", Settler: by}
					if by.Bound && rapid.Bool().Draw(rt, "nack with a request id") {
						nack.RequestID = fmt.Sprintf("nack-%d", ix)
					}
					r := apply(nack)
					if refused("nack", d, r, own) {
						break
					}
					if r.Err != nil {
						rt.Fatal(r.Err)
					}
					requeue(d, delay)
					if nack.RequestID != "" {
						retriable = append(retriable, pastCall{cmd: nack})
					}
				}
			case 6: // Extend, maybe stale
				if d, ok := pick(); ok {
					by, own := settler()
					r := apply(&QueueExtend{Queue: "q", Seq: d.seq, Token: d.token, Visibility: time.Minute, Settler: by})
					if !refused("extend", d, r, own) && r.Err != nil {
						rt.Fatal(r.Err)
					}
				}
			case 7: // the leader's visibility timer, maybe stale
				if d, ok := pick(); ok {
					cur := current(d)
					if r := apply(&QueueExpire{Queue: "q", Seq: d.seq, Token: d.token}); r.Err != nil {
						rt.Fatalf("expire: %v", r.Err)
					}
					if cur {
						requeue(d, 0)
					}
				}
			case 8: // Redrive every dead letter
				redrive := &QueueRedrive{Queue: "q"}
				if rapid.Bool().Draw(rt, "redrive with a request id") {
					redrive.RequestID = fmt.Sprintf("redrive-%d", ix)
				}
				r := apply(redrive)
				if r.Err != nil || r.Queue().Moved != len(dead) {
					rt.Fatalf("redrive moved %v (%v), want %d", r.Queue(), r.Err, len(dead))
				}
				if redrive.RequestID != "" {
					retriable = append(retriable, pastCall{cmd: redrive, moved: len(dead)})
				}
				for _, dl := range dead {
					k := keyOf(dl.key)
					m := mQMsg{seq: dl.msg.seq, sentAt: dl.msg.sentAt, notReady: now}
					if k.blocked {
						k.blocked = false
						k.msgs = append([]mQMsg{m}, k.msgs...)
					} else {
						k.msgs = append(k.msgs, m)
					}
				}
				dead = nil
			case 11: // a Nack or Redrive retried with its request id: the first answer, nothing done
				if len(retriable) == 0 {
					break
				}
				past := rapid.SampledFrom(retriable).Draw(rt, "retry")
				r := apply(past.cmd)
				if r.Err != nil || !r.Dup {
					rt.Fatalf("retried %T: %+v, want the first answer", past.cmd, r)
				}
				if _, redrive := past.cmd.(*QueueRedrive); redrive && (r.Queue() == nil || r.Queue().Moved != past.moved) {
					rt.Fatalf("retried redrive answered %+v, want the first's %d moved", r.Queue(), past.moved)
				}
			case 10: // retention: drop what was sent before a point, except in flight
				before := now - int64(rapid.IntRange(0, 30).Draw(rt, "age"))*int64(time.Second)
				r := apply(&QueueRetire{Queue: "q", Before: before})
				want := 0
				keptDead := dead[:0]
				for _, dl := range dead {
					if dl.msg.sentAt >= before {
						keptDead = append(keptDead, dl)
						continue
					}
					want++
					delete(sent, dl.msg.seq) // retired: no longer owed an ack
					keys[dl.key].blocked = false
				}
				dead = keptDead
				for _, k := range keys {
					var keep []mQMsg
					for i, m := range k.msgs {
						if m.sentAt >= before || (i == 0 && k.token != 0) {
							keep = append(keep, m)
							continue
						}
						want++
						delete(sent, m.seq)
					}
					k.msgs = keep
				}
				if r.Err != nil || r.Queue().Moved != want {
					rt.Fatalf("retire before %d dropped %v (%v), want %d", before, r.Queue(), r.Err, want)
				}
			case 9: // a snapshot and restore, as a follower catching up
				restored, err := Restore(s.Snapshot(), DefaultConfig(), timed)
				if err != nil {
					rt.Fatal(err)
				}
				s = restored
				timed.reset(s)
			}
			timed.check(rt, s)
			capt.step(rt, s)
			info, _ := s.Queue("q")
			inflight := 0
			for _, k := range keys {
				if k.token != 0 {
					inflight++
				}
			}
			if info.Depth != depth() || info.InFlight != inflight || info.Dead != len(dead) {
				rt.Fatalf("queue shows depth %d, in flight %d, dead %d; the model %d, %d, %d",
					info.Depth, info.InFlight, info.Dead, depth(), inflight, len(dead))
			}
		}
		// Drain: every accepted message is delivered and acked exactly once.
		for range 200 {
			if depth() == 0 {
				break
			}
			now += int64(time.Minute) // past every delay
			for _, d := range history {
				if current(d) {
					ack(d)
				}
			}
			if len(dead) > 0 {
				apply(&QueueRedrive{Queue: "q"})
				for _, dl := range dead {
					k := keyOf(dl.key)
					m := mQMsg{seq: dl.msg.seq, sentAt: dl.msg.sentAt, notReady: now}
					if k.blocked {
						k.blocked = false
						k.msgs = append([]mQMsg{m}, k.msgs...)
					} else {
						k.msgs = append(k.msgs, m)
					}
				}
				dead = nil
			}
			r := apply(&QueueReceive{Queue: "q", Max: 100})
			deliver(r.Queue().Deliveries)
		}
		if depth() != 0 {
			rt.Fatalf("the queue did not drain: %d left", depth())
		}
		for seq := range sent {
			if !acked[seq] {
				rt.Fatalf("accepted message %d was never acked", seq)
			}
		}
		if info, _ := s.Queue("q"); info.Depth != 0 || info.Bytes != 0 || s.QueueBytes() != 0 {
			rt.Fatalf("a drained queue still counts %+v, %d bytes in all", info, s.QueueBytes())
		}
	})
}

func wantQueueCode(rt *rapid.T, what string, r Result, c leasehold.Code) {
	if got := leasehold.CodeOf(r.Err); got != c {
		rt.Fatalf("%s: got %v (%v), want %v", what, got, r.Err, c)
	}
}
