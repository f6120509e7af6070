package fsm

import (
	"bytes"
	"encoding/binary"
	"github.com/leasehold/leasehold/api/leasehold"
	"math"
	"reflect"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// sampleCommands has one or more examples of every command kind, with
// every field set, zero values, and extreme values.
func sampleCommands() map[string]Command {
	full := [32]byte{}
	for i := range full {
		full[i] = byte(255 - i)
	}
	return map[string]Command{
		"acquire full": &Acquire{
			RequestID: "req-1", Resources: []string{"a", "b/c", "日本"}, Owner: "worker-7", Operation: "nightly",
			TTL: 15 * time.Second, Wait: time.Minute, LockDelay: 3 * time.Second, MaxHold: time.Hour,
			Metadata: map[string]string{"team": "core", "z": "", "": "empty key"}, SecretHash: full,
			Attempt: "a-1", Caller: "ci-worker",
		},
		"acquire zero":     &Acquire{},
		"acquire extremes": &Acquire{TTL: math.MinInt64, Wait: math.MaxInt64, LockDelay: -1, MaxHold: 1, Resources: []string{strings.Repeat("r", 300)}},
		"renew full":       &Renew{RequestID: "req-2", LeaseID: 42, SecretHash: full, Progress: "rows 1-1000", Age: 90 * time.Second, Caller: "ci-worker"},
		"renew zero":       &Renew{},
		"renew extremes":   &Renew{LeaseID: math.MaxUint64, Age: math.MinInt64},
		"release full":     &Release{RequestID: "req-3", LeaseID: 7, SecretHash: full, Caller: "日本"},
		"release zero":     &Release{},
		"expire":           &Expire{LeaseID: math.MaxUint64, RenewCount: math.MaxUint64},
		"expire zero":      &Expire{},
		"cancel":           &Cancel{Key: "req-4"},
		"cancel zero":      &Cancel{},
		"wait timeout":     &WaitTimeout{Key: "req-5"},
		"wait timeout 0":   &WaitTimeout{},
		"unblock":          &Unblock{Resource: "a", Token: 1 << 40},
		"unblock zero":     &Unblock{},
		"put full": &Put{RequestID: "req-6", Key: "cfg/a", Value: []byte{0, 1, 2}, IfVersion: 9, HasIfVersion: true,
			Fence: &leasehold.Fence{Resource: "a", Token: 1 << 50}, Caller: "ci-worker"},
		"put plain": &Put{Key: "k", Value: []byte("v")},
		"put partition fence": &Put{Key: "k", Value: []byte("v"),
			Fence: &leasehold.Fence{Group: "g", Partition: math.MaxUint32, Token: math.MaxUint64}},
		"delete queue fence": &Delete{Key: "k", Fence: &leasehold.Fence{Queue: "jobs", Key: "日本", Token: 7}},
		"txn queue fence":    &Txn{Fence: &leasehold.Fence{Queue: "jobs", Token: 1}},
		"delete full":        &Delete{RequestID: "req-7", Key: "k", HasIfVersion: true, Fence: &leasehold.Fence{Resource: "r", Token: 3}, Caller: "ci-worker"},
		"delete plain":       &Delete{Key: "k"},
		"force release":      &ForceRelease{RequestID: "req-8", Resource: "r", LeaseID: 9, Actor: "alice", Reason: "stuck since 3am"},
		"force release named": &ForceRelease{RequestID: "req-8", Resource: leasehold.ReservedPrefix + "group/g/m-1", LeaseID: 9,
			Actor: "alice", Reason: "stuck", named: true},
		"raise tokens": &RaiseTokens{Floor: math.MaxUint64},
		"txn full": &Txn{RequestID: "req-9", Caller: "ci-worker", Fence: &leasehold.Fence{Resource: "r", Token: 5},
			Compares: []Compare{{Key: "a", Op: CompareVersionEqual, Version: math.MaxUint64}, {Key: "b", Op: CompareValueEqual, Value: []byte{0, 1}},
				{Key: "c", Op: CompareOp(255)}},
			Then: []TxnOp{{Key: "a", Value: []byte("x")}, {Key: "b", Delete: true}}, Else: []TxnOp{{Key: "日本", Value: []byte{}}}},
		"txn zero":  &Txn{},
		"txn bound": &Txn{Then: []TxnOp{{Key: "svc/a", Value: []byte("up"), Lease: &LeaseProof{ID: math.MaxUint64, SecretHash: full}}}},
		"campaign": &Campaign{Acquire: Acquire{RequestID: "req-10", Resources: []string{"leader"}, Owner: "n1", TTL: time.Second,
			Wait: time.Minute, SecretHash: full, Attempt: "a", Caller: "c"}, Value: []byte("http://n1")},
		"campaign zero": &Campaign{Value: []byte{}},
		"sem acquire": &SemAcquire{Acquire: Acquire{RequestID: "req-12", Resources: []string{"pool"}, Owner: "n1", TTL: time.Second,
			Wait: time.Minute, SecretHash: full, Attempt: "a", Caller: "c"}, Limit: leasehold.MaxSemaphoreLimit},
		"sem acquire zero": &SemAcquire{},
		"proclaim":         &Proclaim{RequestID: "req-11", LeaseID: 3, SecretHash: full, Value: []byte("v2"), Caller: "c"},
		"proclaim zero":    &Proclaim{Value: []byte{}},
		"idem begin": &IdemBegin{Key: "pay/1", Fingerprint: full, Owner: "o", TTL: time.Second,
			Retention: time.Hour, SecretHash: full, Caller: "c"},
		"idem begin zero":     &IdemBegin{},
		"idem begin old kind": &IdemBegin{Key: "pay/1", Owner: "o", TTL: time.Second, Caller: "c", oldKind: true},
		"idem complete":       &IdemComplete{Key: "pay/1", LeaseID: 7, SecretHash: full, Result: []byte("r")},
		"idem complete zero":  &IdemComplete{Result: []byte{}},
		"idem forget":         &IdemForget{Key: "pay/1", Token: 9},
		"queue create": &QueueCreate{Queue: "jobs", Caller: "c", Settings: QueueSettings{Visibility: time.Minute, MaxReceives: 3,
			Retention: time.Hour, MaxDepth: 10, MaxBytes: 1 << 20, MaxInFlightPerConsumer: 4, DedupWindow: time.Minute, DeadLetter: DeadLetterBlock}},
		"queue create zero": &QueueCreate{},
		"queue send": &QueueSend{Queue: "jobs", Caller: "c", Messages: []QueueMessage{{Key: "k", Body: []byte{0, 1}, DedupID: "d", Delay: time.Second},
			{Key: "日本", Body: []byte{}, Delay: math.MinInt64}}},
		"queue send zero":    &QueueSend{},
		"queue receive":      &QueueReceive{Queue: "jobs", Max: 100, Visibility: time.Minute, Caller: "c"},
		"queue receive zero": &QueueReceive{Max: math.MinInt},
		"queue ack":          &QueueAck{RequestID: "r", Queue: "jobs", Seq: math.MaxUint64, Token: 9, Caller: "c"},
		"queue ack zero":     &QueueAck{},
		"queue nack":         &QueueNack{Queue: "jobs", Seq: 1, Token: 2, Delay: time.Second, Note: "db down"},
		"queue nack zero":    &QueueNack{},
		"queue extend":       &QueueExtend{Queue: "jobs", Seq: 1, Token: 2, Visibility: time.Minute, Progress: "half"},
		"queue extend zero":  &QueueExtend{},
		"queue receive id":   &QueueReceiveID{QueueReceive{Queue: "jobs", Max: 3, Visibility: time.Minute, Caller: "c/w1", RequestID: "r"}},
		"queue ack by": &QueueAck{RequestID: "r", Queue: "jobs", Seq: 1, Token: 9, Caller: "c",
			Settler: Settler{Consumer: "c/w1", Bound: true}},
		"queue ack by no consumer": &QueueAck{Settler: Settler{Bound: true}},
		"queue nack by": &QueueNack{Queue: "jobs", Seq: 1, Token: 2, Delay: time.Second, Note: "db down",
			Settler: Settler{Consumer: "c/w1", Bound: true}},
		"queue extend by": &QueueExtend{Queue: "jobs", Seq: 1, Token: 2, Visibility: time.Minute, Progress: "half",
			Settler: Settler{Consumer: "c/w1", Bound: true}},
		"queue expire":       &QueueExpire{Queue: "jobs", Seq: 1, Token: math.MaxUint64},
		"queue expire zero":  &QueueExpire{},
		"queue redrive":      &QueueRedrive{Queue: "jobs", Max: 5, Actor: "alice"},
		"queue redrive zero": &QueueRedrive{},
		"queue purge":        &QueuePurge{Queue: "jobs", Actor: "alice", Reason: "bad deploy"},
		"queue purge zero":   &QueuePurge{},
		"queue delete":       &QueueDelete{Queue: "jobs", Actor: "alice", Reason: "unused"},
		"queue delete zero":  &QueueDelete{},
		"queue create id": &QueueCreateID{QueueCreate{Queue: "jobs", Caller: "c", Settings: QueueSettings{MaxReceives: 3},
			RequestID: "r"}},
		"queue create id zero": &QueueCreateID{},
		"queue nack id": &QueueNackID{QueueNack{Queue: "jobs", Seq: 1, Token: 2, Delay: time.Second, Note: "db down",
			Settler: Settler{Consumer: "c/w1", Bound: true}, RequestID: "r"}},
		"queue nack id zero":    &QueueNackID{QueueNack{Settler: Settler{Bound: true}}},
		"queue redrive id":      &QueueRedriveID{QueueRedrive{Queue: "jobs", Max: 5, Actor: "alice", RequestID: "r"}},
		"queue redrive id zero": &QueueRedriveID{},
		"queue purge id":        &QueuePurgeID{QueuePurge{Queue: "jobs", Actor: "alice", Reason: "bad deploy", RequestID: "r"}},
		"queue purge id zero":   &QueuePurgeID{},
		"queue delete id":       &QueueDeleteID{QueueDelete{Queue: "jobs", Actor: "alice", Reason: "unused", RequestID: "r"}},
		"queue delete id zero":  &QueueDeleteID{},
		"idem abandon": &IdemAbandon{Key: "pay/1", Release: Release{RequestID: "r", LeaseID: 7, SecretHash: full,
			Caller: "c"}},
		"idem abandon zero": &IdemAbandon{},
		"queue retire":      &QueueRetire{Queue: "jobs", Before: math.MinInt64},
		"queue retire zero": &QueueRetire{},
		"group create":      &GroupCreate{Group: "g", Partitions: math.MaxUint32, RevokeTimeout: time.Minute, Caller: "c"},
		"group create zero": &GroupCreate{},
		"group grow":        &GroupGrow{Group: "g", Partitions: 65536, Caller: "c"},
		"group grow zero":   &GroupGrow{},
		"group delete":      &GroupDelete{Group: "g", Actor: "alice", Reason: "unused"},
		"group delete zero": &GroupDelete{},
		"group join": &GroupJoin{Group: "g", Member: "m-1", TTL: time.Second, Metadata: map[string]string{"host": "a"},
			SecretHash: full, Caller: "c"},
		"group join zero":     &GroupJoin{},
		"group join old kind": &GroupJoin{Group: "g", Member: "m-1", TTL: time.Second, Caller: "c", oldKind: true},
		"group leave":         &GroupLeave{RequestID: "r", LeaseID: math.MaxUint64, SecretHash: full, Caller: "c"},
		"group leave zero":    &GroupLeave{},
		"group revoked":       &GroupRevoked{Group: "g", Member: "m", LeaseID: 3, SecretHash: full, Partition: 7, Epoch: math.MaxUint64},
		"group revoked zero":  &GroupRevoked{},
		"group lapse":         &GroupLapse{Group: "g", LeaseID: 3, Partition: math.MaxUint32, Epoch: 9},
		"group lapse zero":    &GroupLapse{},
		"barrier create":      &BarrierCreate{Name: "b/日本", Type: leasehold.BarrierLatch, Parties: math.MaxUint32, Timeout: math.MinInt64, Caller: "c"},
		"barrier create zero": &BarrierCreate{},
		"barrier arrive": &BarrierArrive{RequestID: "r", Name: "b", Participant: "p", Phase: math.MaxUint64, TTL: time.Second,
			SecretHash: full, Caller: "c"},
		"barrier arrive zero":     &BarrierArrive{},
		"barrier count down":      &BarrierCountDown{RequestID: "r", Name: "b", Phase: 3, Count: math.MaxUint32, Caller: "c"},
		"barrier count down zero": &BarrierCountDown{},
		"barrier reset":           &BarrierReset{RequestID: "r", Name: "b", Caller: "c"},
		"barrier reset zero":      &BarrierReset{},
		"barrier delete":          &BarrierDelete{RequestID: "r", Name: "b", Caller: "c"},
		"barrier delete zero":     &BarrierDelete{},
		"barrier timeout":         &BarrierTimeout{Name: "b", Phase: math.MaxUint64, Started: math.MinInt64},
		"barrier timeout zero":    &BarrierTimeout{},
	}
}

func TestCommandRoundTrip(t *testing.T) {
	covered := map[Kind]bool{}
	var all []Command
	for name, c := range sampleCommands() {
		covered[c.Kind()] = true
		all = append(all, c)
		t.Run(name, func(t *testing.T) {
			for _, tm := range []int64{0, t0, -1, math.MaxInt64, math.MinInt64} {
				b := &Batch{Time: tm, Cmds: []Command{c}}
				enc := b.Encode(nil)
				got, err := DecodeBatch(enc)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if !reflect.DeepEqual(got, b) {
					t.Fatalf("round trip:\n got %#v\nwant %#v", got.Cmds[0], c)
				}
				if !bytes.Equal(got.Encode(nil), enc) {
					t.Fatal("re-encoding differs")
				}
			}
		})
	}
	t.Run("every kind is registered and sampled", func(t *testing.T) {
		for k := range 256 {
			c := newCommand(Kind(k))
			if c == nil {
				continue
			}
			if c.Kind() != Kind(k) {
				t.Fatalf("newCommand(%d).Kind() = %d", k, c.Kind())
			}
			if Kind(k)&Ignorable != 0 {
				t.Fatalf("kind %d is registered with the ignorable bit", k)
			}
			if commands[k].version < 1 {
				t.Fatalf("kind %d has body version %d; versions start at 1", k, commands[k].version)
			}
			if !covered[Kind(k)] {
				t.Fatalf("kind %d has no round-trip sample", k)
			}
		}
		for _, k := range []Kind{KindAcquire, KindRenew, KindRelease, KindExpire, KindCancel, KindWaitTimeout, KindUnblock} {
			if newCommand(k) == nil {
				t.Fatalf("kind %d is not registered", k)
			}
		}
	})
	t.Run("all kinds in one batch", func(t *testing.T) {
		b := &Batch{Time: t0, Cmds: all}
		got, err := DecodeBatch(b.Encode(nil))
		if err != nil || !reflect.DeepEqual(got, b) {
			t.Fatalf("round trip of %d commands: %v", len(all), err)
		}
	})
	t.Run("empty batch", func(t *testing.T) {
		got, err := DecodeBatch((&Batch{Time: 5}).Encode(nil))
		if err != nil || got.Time != 5 || len(got.Cmds) != 0 {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("Encode appends", func(t *testing.T) {
		b := &Batch{Time: 1, Cmds: []Command{&Cancel{Key: "x"}}}
		enc := b.Encode([]byte("head"))
		if !bytes.HasPrefix(enc, []byte("head")) || !bytes.Equal(enc[4:], b.Encode(nil)) {
			t.Fatal("Encode does not append to its buffer")
		}
	})
}

// rawBatch builds an entry by hand: version, time, then (kind, body) pairs.
func rawBatch(version byte, cmds ...any) []byte {
	b := []byte{version}
	b = binary.AppendVarint(b, 1)
	b = binary.AppendUvarint(b, uint64(len(cmds)/2))
	for i := 0; i+1 < len(cmds); i += 2 {
		body := cmds[i+1].([]byte)
		b = append(b, byte(cmds[i].(Kind)))
		b = binary.AppendUvarint(b, uint64(len(body)))
		b = append(b, body...)
	}
	return b
}

func cancelBody(id string) []byte {
	var e encoder
	(&Cancel{Key: id}).encode(&e)
	return e.b
}

func TestDecodeBatchErrors(t *testing.T) {
	good := (&Batch{Time: t0, Cmds: []Command{sampleCommands()["acquire full"], &Cancel{Key: "c"}}}).Encode(nil)
	cases := []struct {
		name    string
		data    []byte
		wantErr string // substring; "" = errCorrupt
	}{
		{name: "empty", data: nil},
		{name: "version 0", data: rawBatch(0), wantErr: "version"},
		{name: "newer version", data: rawBatch(batchVersion + 1), wantErr: "version"},
		{name: "unknown kind", data: rawBatch(1, Kind(100), []byte{}), wantErr: "unknown command kind"},
		{name: "unknown kind 0", data: rawBatch(1, Kind(0), []byte{}), wantErr: "unknown command kind"},
		{name: "trailing byte", data: append(append([]byte(nil), good...), 0)},
		{name: "body longer than the command", data: rawBatch(1, KindCancel, append(cancelBody("x"), 0))},
		{name: "body shorter than the command", data: rawBatch(1, KindExpire, []byte{1})},
		{name: "body size past the end", data: []byte{1, 2, 1, byte(KindCancel), 0x80, 0x80, 0x04}},
		{name: "count past the end", data: []byte{1, 2, 0xff, 0xff, 0xff, 0xff, 0x07}},
		{name: "count over 2^31", data: []byte{1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}},
		{name: "overlong varint", data: []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{name: "string length past the end", data: rawBatch(1, KindCancel, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 'a'})},
		{name: "hash cut short", data: rawBatch(1, KindRelease, []byte{0, 1, 1, 2, 3})},
		{name: "no body version", data: rawBatch(3, KindExpire, []byte{})},
		{name: "body version 0", data: rawBatch(3, KindCancel, append([]byte{0}, cancelBody("x")...))},
		{name: "body version newer than the kind's", data: rawBatch(3, KindCancel, append([]byte{2}, cancelBody("x")...)),
			wantErr: "body version 2 is newer than this node knows (up to 1): upgrade it"},
		// The barrier kinds' bodies carried their body version in batch
		// version 2 already: it is read, and checked, there too.
		{name: "a barrier body of batch version 2 without its body version", data: rawBatch(2, KindBarrierReset, []byte{})},
		{name: "a barrier body of batch version 2 of body version 0", data: rawBatch(2, KindBarrierReset, []byte{0, 1, 'r', 1, 'b', 1, 'c'})},
		{name: "a barrier body of batch version 2 newer than the kind's", data: rawBatch(2, KindBarrierReset, []byte{2, 1, 'r', 1, 'b', 1, 'c'}),
			wantErr: "body version 2 is newer than this node knows (up to 1): upgrade it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := DecodeBatch(tc.data)
			if err == nil {
				t.Fatalf("decoded %+v", b)
			}
			if b != nil {
				t.Fatal("a batch returned with an error")
			}
			if tc.wantErr == "" && err != errCorrupt {
				t.Fatalf("err = %v, want errCorrupt", err)
			}
			if tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
			}
		})
	}
	t.Run("a body of batch version 2 is body version 1 of batch version 3", func(t *testing.T) {
		for _, c := range sampleCommands() {
			var body encoder
			c.encode(&body)
			v2 := body.b
			if rowOf(c.Kind()).inBody { // its batch version 2 bodies began with their body version already
				v2 = append([]byte{1}, body.b...)
			}
			old, err2 := DecodeBatch(rawBatch(2, c.Kind(), v2))
			cur, err3 := DecodeBatch(rawBatch(3, c.Kind(), append([]byte{1}, body.b...)))
			if err2 != nil || err3 != nil || !reflect.DeepEqual(old, cur) {
				t.Fatalf("kind %v: %v, %v:\n%#v\n%#v", c.Kind(), err2, err3, old, cur)
			}
		}
	})
	t.Run("every truncation", func(t *testing.T) {
		for n := range len(good) {
			if _, err := DecodeBatch(good[:n]); err == nil {
				t.Fatalf("decoded the first %d of %d bytes", n, len(good))
			}
		}
	})
	t.Run("ignorable unknown kinds are skipped", func(t *testing.T) {
		data := rawBatch(1,
			Ignorable|9, []byte("whatever a newer node wrote"),
			KindCancel, cancelBody("kept"),
			Ignorable, []byte{},
			Kind(0xff), []byte{1, 2, 3})
		b, err := DecodeBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		want := []Command{&Cancel{Key: "kept"}}
		if !reflect.DeepEqual(b.Cmds, want) {
			t.Fatalf("cmds = %#v", b.Cmds)
		}
	})
}

// totalAlloc is the bytes allocated so far by the process. It reads
// runtime/metrics rather than ReadMemStats, which stops the world and would
// slow the fuzzers down tenfold. Small allocations may be counted a little
// late (per-P caches), which allocBound's constant absorbs; a large
// allocation is counted at once.
func totalAlloc() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// allocBound is how much a decoder may allocate for n input bytes: a
// constant plus a linear factor that covers headers, maps and structs.
func allocBound(n int) uint64 { return 4<<20 + 64*uint64(n) }

func TestDecodeDoesNotOverAllocate(t *testing.T) {
	// Each input claims far more than it holds.
	claims := map[string][]byte{
		"batch count":     {1, 2, 0xff, 0xff, 0xff, 0xff, 0x07},
		"resource count":  rawBatch(1, KindAcquire, []byte{0, 0xff, 0xff, 0xff, 0xff, 0x07}),
		"metadata count":  rawBatch(1, KindAcquire, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x07}),
		"string length":   rawBatch(1, KindCancel, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f}),
		"snapshot leases": append([]byte(snapMagic+"\x01\x01\x01\x01"), 0xff, 0xff, 0xff, 0xff, 0x07),
		"snapshot lease resources": append([]byte(snapMagic+"\x01\x01\x01\x01\x01\x01\x01"),
			0xff, 0xff, 0xff, 0xff, 0x07, 0, 0, 0, 0, 0, 0, 0, 0),
		"snapshot dedup": append([]byte(snapMagic+"\x01\x01\x01\x01\x00\x00\x00"), 0xff, 0xff, 0xff, 0xff, 0x07),
	}
	for name, data := range claims {
		t.Run(name, func(t *testing.T) {
			before := totalAlloc()
			var err error
			if bytes.HasPrefix(data, []byte(snapMagic)) {
				_, err = Restore(data, DefaultConfig(), nil)
			} else {
				_, err = DecodeBatch(data)
			}
			used := totalAlloc() - before
			if err == nil {
				t.Fatal("accepted")
			}
			if used > allocBound(len(data)) {
				t.Fatalf("allocated %d bytes for a %d-byte input", used, len(data))
			}
		})
	}
}

// Go's byte minimizer is quadratic in the input's length, so the fuzzers
// are seeded with small real encodings (a few hundred bytes at most), and
// TestFuzzBodiesOnLargeInputs runs the same checks on large ones.

// seedBatches are real encodings for FuzzDecodeBatch's corpus.
func seedBatches() [][]byte {
	var out [][]byte
	for _, c := range sampleCommands() {
		out = append(out, (&Batch{Time: t0, Cmds: []Command{c}}).Encode(nil))
	}
	out = append(out, (&Batch{Time: t0, Cmds: []Command{&Renew{LeaseID: 3}, &Release{RequestID: "r", LeaseID: 3}}}).Encode(nil))
	out = append(out, (&Batch{}).Encode(nil))
	out = append(out, rawBatch(1, Ignorable|3, []byte("x"), KindCancel, cancelBody("c")))
	return out
}

// checkDecodeInput is FuzzDecodeBatch's property for one input.
func checkDecodeInput(t *testing.T, data []byte) {
	before := totalAlloc()
	b, err := DecodeBatch(data)
	if used := totalAlloc() - before; used > allocBound(len(data)) {
		t.Fatalf("allocated %d bytes decoding %d", used, len(data))
	}
	if err != nil {
		if b != nil {
			t.Fatal("a batch returned with an error")
		}
		return
	}
	enc := b.Encode(nil)
	b2, err := DecodeBatch(enc)
	if err != nil {
		t.Fatalf("re-encoded batch does not decode: %v", err)
	}
	// An old (version 1) entry is only ever read: written again, its
	// commands are current ones, whose request IDs are scoped.
	if data[0] == batchVersion && !reflect.DeepEqual(b, b2) {
		t.Fatalf("round trip differs:\n%#v\n%#v", b, b2)
	}
	if !bytes.Equal(b2.Encode(nil), enc) {
		t.Fatal("encoding is not canonical after one round trip")
	}
	// Whatever a log entry holds, applying it must not panic, and the
	// state must stay snapshot-able.
	h := newHarness(t)
	h.mustGrant(acq("a", "a"))
	h.mustQueue(wacq("w", "a"))
	out := h.s.Apply(h.ix+1, b)
	if len(out) != len(b.Cmds) {
		t.Fatalf("%d results for %d commands", len(out), len(b.Cmds))
	}
	if _, err := Restore(h.s.Snapshot(), DefaultConfig(), nil); err != nil {
		t.Fatalf("snapshot after applying a decoded entry does not restore: %v", err)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	for _, s := range seedBatches() {
		f.Add(s)
	}
	for _, e := range legacyLog(f) { // version 1 entries
		f.Add(e.raw)
	}
	f.Fuzz(checkDecodeInput)
}

// seedSnapshots are small real snapshots for FuzzRestore's corpus: each
// section of the format (leases, lock-delays, waiters, dedup records)
// appears in at least one of them.
func seedSnapshots(t testing.TB) [][]byte {
	out := [][]byte{New(DefaultConfig(), nil).Snapshot()}

	h := newHarness(t) // a lease with metadata and a renewal
	c := acq("a", "x")
	c.Metadata = map[string]string{"k": "v"}
	l := h.mustGrant(c)
	h.one(&Renew{LeaseID: l.ID, SecretHash: secret("a"), Progress: "p", Age: time.Second})
	out = append(out, h.s.Snapshot())

	h = newHarness(t) // a waiter and a lock-delay
	c = acq("", "x")
	c.LockDelay = time.Second
	l = h.mustGrant(c)
	h.one(&Expire{LeaseID: l.ID})
	h.mustQueue(wacq("w", "x"))
	out = append(out, h.s.Snapshot())

	h = newHarness(t) // dedup records: an error, and a queued acquire
	h.one(&Release{RequestID: "r", LeaseID: 9})
	h.one(&Cancel{Key: "r"})
	out = append(out, h.s.Snapshot())

	g := New(DefaultConfig(), nil) // the golden entries: queues with a delivery in flight, a dead letter, dedup ids
	for i, b := range goldenEntries() {
		g.Apply(uint64(i+1), b)
	}
	out = append(out, g.Snapshot())
	return out
}

func uniqueArrivals(s *State) bool {
	seen := map[uint64]bool{}
	for _, w := range s.leases.waiters.all() {
		if seen[w.arrival] {
			return false
		}
		seen[w.arrival] = true
	}
	return true
}

// checkRestoreInput is FuzzRestore's property for one input.
func checkRestoreInput(t *testing.T, data []byte) {
	before := totalAlloc()
	s, err := Restore(data, DefaultConfig(), nil)
	if used := totalAlloc() - before; used > allocBound(len(data)) {
		t.Fatalf("allocated %d bytes restoring %d", used, len(data))
	}
	if err != nil {
		if s != nil {
			t.Fatal("a state returned with an error")
		}
		return
	}
	// A restored state's own snapshot always restores, and (when the
	// input was not contradictory about arrival order) is a fixed point.
	snap := s.Snapshot()
	s2, err := Restore(snap, DefaultConfig(), nil)
	if err != nil {
		t.Fatalf("re-snapshot does not restore: %v", err)
	}
	if uniqueArrivals(s) && !bytes.Equal(s2.Snapshot(), snap) {
		t.Fatal("snapshot -> restore -> snapshot is not a fixed point")
	}
}

func FuzzRestore(f *testing.F) {
	for _, s := range seedSnapshots(f) {
		f.Add(s)
	}
	f.Add([]byte(snapMagic + "\x01"))
	f.Add(legacySnapshotBytes(f, "legacy-v4.snapshot.hex"))
	f.Fuzz(checkRestoreInput)
}

// TestFuzzBodiesOnLargeInputs runs the fuzzers' checks on large real
// encodings, and on every single-byte corruption of them.
func TestFuzzBodiesOnLargeInputs(t *testing.T) {
	var all []Command
	for _, c := range sampleCommands() {
		all = append(all, c)
	}
	batch := (&Batch{Time: t0, Cmds: all}).Encode(nil)

	g := newRandomLog(7)
	s := New(Config{DedupWindow: time.Hour, DedupMax: 1000}, g)
	for i := 1; i <= 60; i++ {
		g.learn(s.Apply(uint64(i), &Batch{Time: t0 + int64(i)*int64(time.Second), Cmds: g.batch()}))
	}
	snaps := [][]byte{richState(t).s.Snapshot(), s.Snapshot()}

	corrupt := func(data []byte, check func(*testing.T, []byte)) {
		check(t, data)
		step := max(1, len(data)/300) // keep the run short on big inputs
		for i := 0; i < len(data); i += step {
			for _, x := range []byte{0x01, 0x80, 0xff} {
				d := append([]byte(nil), data...)
				d[i] ^= x
				check(t, d)
			}
		}
	}
	corrupt(batch, checkDecodeInput)
	for _, snap := range snaps {
		corrupt(snap, checkRestoreInput)
	}
}
