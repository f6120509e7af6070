package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// fsm/testdata/current-* pin the bytes of the current formats: log entries
// of batch version 3 and a snapshot of version 15 (the log's first five
// entries were written by the code of commit 8e70a2d, the sixth, a Txn, by
// the commit that added it; testdata/legacy-v5.snapshot.hex is the
// snapshot of those first five, legacy-v10 of the first ten, legacy-v12
// of the first eleven, legacy-v13 of all twelve, written with
// legacy-v2.log.hex before leasehold's own leases were named under
// leasehold.ReservedPrefix: its Joins and Begins are the old kinds;
// legacy-v14 is of all twelve too, written before the barriers of the
// thirteenth; testdata/legacy-v2-named.log.hex is the same entries as
// batch version 2 wrote them, before command bodies carried a body
// version, but for the barriers', which carried one from the start).
// They must not change while those versions stand: an old node reads what
// a new one writes. LEASEHOLD_WRITE_GOLDEN=1 rewrites the current ones,
// only when a version is raised on purpose; a legacy fixture is never
// rewritten.

// goldenEntries are batches of version 2 that touch every section: scoped
// grants, a queue, a lock-delay, fenced and plain KV writes, a forced
// release (audit), a token floor, and dedup records of each kind.
func goldenEntries() []*Batch {
	kv := func(id, key, val string) *Put {
		return &Put{RequestID: id, Key: key, Value: []byte(val), Caller: "svc"}
	}
	at := func(ix int64) int64 { return t0 + ix*int64(time.Second) }
	return []*Batch{
		{Time: at(1), Cmds: []Command{
			&Acquire{RequestID: "g1", Resources: []string{"a", "b"}, Owner: "o1", Operation: "op1", TTL: 10 * time.Second,
				LockDelay: 2 * time.Second, MaxHold: time.Minute, Metadata: map[string]string{"k": "v", "a": "z"},
				SecretHash: secret("g1"), Attempt: "t1", Caller: "alice"},
			&Acquire{RequestID: "g2", Resources: []string{"c"}, Owner: "o2", Operation: "op2", TTL: 10 * time.Second,
				SecretHash: secret("g2"), Attempt: "t1", Caller: "bob"},
		}},
		{Time: at(2), Cmds: []Command{
			&Acquire{RequestID: "w1", Resources: []string{"a"}, Owner: "o3", Operation: "op3", TTL: 10 * time.Second,
				Wait: time.Minute, SecretHash: secret("w1"), Attempt: "t1", Caller: "carol"},
			&Acquire{RequestID: "w2", Resources: []string{"c", "d"}, Owner: "o4", Operation: "op4", TTL: 10 * time.Second,
				Wait: time.Minute, SecretHash: secret("w2"), Attempt: "t1"},
			&Renew{RequestID: "r1", LeaseID: 1, SecretHash: secret("g1"), Progress: "half way", Age: 3 * time.Second, Caller: "alice"},
		}},
		{Time: at(3), Cmds: []Command{
			kv("p1", "k1", "one"),
			&Put{RequestID: "p2", Key: "k2", Value: []byte("two"), HasIfVersion: true, Caller: "svc",
				Fence: &leasehold.Fence{Resource: "c", Token: 2}},
			kv("p3", "k3", "three"),
			&Delete{RequestID: "p4", Key: "k3", Caller: "svc"},
			&Put{RequestID: "p5", Key: "k4", Value: []byte("stale"), Caller: "svc", Fence: &leasehold.Fence{Resource: "a", Token: 99}},
		}},
		{Time: at(4), Cmds: []Command{
			&Expire{LeaseID: 1, RenewCount: 1},
			&ForceRelease{RequestID: "f1", Resource: "c", LeaseID: 2, Actor: "admin", Reason: "stuck job"},
			&RaiseTokens{Floor: 50},
		}},
		{Time: at(5), Cmds: []Command{
			&Acquire{RequestID: "g3", Resources: []string{"e"}, Owner: "o5", Operation: "op5", TTL: 10 * time.Second,
				SecretHash: secret("g3"), Attempt: "t1"},
			&Acquire{RequestID: "w3", Resources: []string{"e"}, Owner: "o6", Operation: "op6", TTL: 10 * time.Second,
				Wait: time.Minute, SecretHash: secret("w3"), Attempt: "t1", Caller: "dave"},
			&Release{RequestID: "x1", LeaseID: 7, SecretHash: secret("nobody"), Caller: "mallory"},
			&Cancel{Key: requestKey("carol", secret("w1"), "w1"), Attempt: "t0"},
			&WaitTimeout{Key: "no such waiter"},
			&Unblock{Resource: "a", Token: 1},
		}},
		{Time: at(6), Cmds: []Command{ // batch 6 is newer than the v5 snapshot fixture
			&Txn{RequestID: "t1", Caller: "svc", Compares: []Compare{{Key: "k1", Op: CompareValueEqual, Value: []byte("one")},
				{Key: "k9", Op: CompareAbsent}}, Then: []TxnOp{{Key: "k9", Value: []byte("nine")}, {Key: "k1", Delete: true}},
				Else: []TxnOp{{Key: "k8", Value: []byte("eight")}}},
			&Txn{RequestID: "t2", Caller: "svc", Then: []TxnOp{{Key: "alive/o5", Value: []byte("o5"),
				Lease: &LeaseProof{ID: 50, SecretHash: secret("g3")}}}}, // g3's lease, the token floor
			&Campaign{Acquire: Acquire{RequestID: "c1", Resources: []string{"leader/x"}, Owner: "o7", Operation: "op7", TTL: 10 * time.Second,
				SecretHash: secret("c1"), Attempt: "t1", Caller: "erin"}, Value: []byte("node-1")},
			&Campaign{Acquire: Acquire{RequestID: "c2", Resources: []string{"leader/x"}, Owner: "o8", Operation: "op8", TTL: 10 * time.Second,
				Wait: time.Minute, SecretHash: secret("c2"), Attempt: "t1", Caller: "erin"}, Value: []byte("node-2")},
		}},
		{Time: at(7), Cmds: []Command{ // batch 7 is newer than the v6 snapshot fixture
			&IdemBegin{Key: "pay/1", Fingerprint: secret("body1"), Owner: "api", TTL: 10 * time.Second,
				SecretHash: secret("i1"), Caller: "svc"},
			&IdemBegin{Key: "pay/2", Fingerprint: secret("body2"), Owner: "api", TTL: 10 * time.Second,
				Retention: time.Hour, SecretHash: secret("i2"), Caller: "svc"},
			&IdemComplete{Key: "pay/1", LeaseID: 55, SecretHash: secret("i1"), Result: []byte("paid")},
			&IdemForget{Key: "pay/9", Token: 3},
		}},
		{Time: at(8), Cmds: []Command{ // batch 8 is newer than the v7 snapshot fixture
			&QueueCreate{Queue: "jobs", Caller: "svc", Settings: QueueSettings{MaxReceives: 1, DeadLetter: DeadLetterBlock}},
			&QueueCreate{Queue: "mail", Caller: "svc"},
			&QueueSend{Queue: "jobs", Caller: "svc", Messages: []QueueMessage{{Key: "a", Body: []byte("a1"), DedupID: "d1"},
				{Key: "a", Body: []byte("a2")}, {Key: "b", Body: []byte("b1"), Delay: time.Second}, {Key: "c", Body: []byte("c1")}}},
			&QueueSend{Queue: "mail", Caller: "svc", Messages: []QueueMessage{{Key: "x", Body: []byte("x1")}}},
			&QueueReceive{Queue: "jobs", Max: 2, Caller: "worker"},       // a1 (token 55), c1 (56)
			&QueueNack{Queue: "jobs", Seq: 4, Token: 56, Note: "poison"}, // c1 dead, key c blocked
			&QueueAck{RequestID: "a1", Queue: "jobs", Seq: 1, Token: 55, Caller: "worker"},
			&QueueReceive{Queue: "jobs", Max: 1, Caller: "worker"}, // a2, in flight in the snapshot
			&QueueSend{Queue: "jobs", Caller: "svc", Messages: []QueueMessage{{Key: "a", Body: []byte("dup"), DedupID: "d1"}}},
		}},
		{Time: at(9), Cmds: []Command{ // batch 9 is newer than the v8 snapshot fixture
			&GroupCreate{Group: "shards", Partitions: 5, RevokeTimeout: 3 * time.Second, Caller: "svc"},
			&GroupCreate{Group: "gone", Partitions: 1, Caller: "svc"},
			&GroupJoin{Group: "shards", Member: "w1", TTL: 10 * time.Second, Metadata: map[string]string{"host": "a"},
				SecretHash: secret("w1"), Caller: "worker"}, // all five partitions
			&GroupJoin{Group: "gone", Member: "w9", TTL: 10 * time.Second, SecretHash: secret("w9"), Caller: "worker"},
			&GroupDelete{Group: "gone", Actor: "admin", Reason: "retired"},
			&GroupGrow{Group: "shards", Partitions: 6, Caller: "svc"},
			&GroupJoin{Group: "shards", Member: "w2", TTL: 10 * time.Second, SecretHash: secret("w2"), Caller: "worker"}, // three revoking
			&GroupRevoked{Group: "shards", Member: "w1", LeaseID: 58, SecretHash: secret("w1"), Partition: 5, Epoch: 66}, // to w2
			&GroupLeave{RequestID: "bye", LeaseID: 67, SecretHash: secret("nobody"), Caller: "worker"},                   // refused
			&GroupLapse{Group: "shards", LeaseID: 58, Partition: 3, Epoch: 1},                                            // stale
		}},
		{Time: at(10), Cmds: []Command{ // batch 10 is newer than the v9 snapshot fixture
			&SemAcquire{Acquire: Acquire{RequestID: "s1", Resources: []string{"pool"}, Owner: "o9", TTL: 10 * time.Second,
				SecretHash: secret("s1"), Attempt: "t1", Caller: "frank"}, Limit: 2},
			&SemAcquire{Acquire: Acquire{RequestID: "s2", Resources: []string{"pool"}, Owner: "o10", TTL: 10 * time.Second,
				SecretHash: secret("s2"), Attempt: "t1", Caller: "frank"}, Limit: 2},
			&SemAcquire{Acquire: Acquire{RequestID: "s3", Resources: []string{"pool"}, Owner: "o11", TTL: 10 * time.Second,
				Wait: time.Minute, SecretHash: secret("s3"), Attempt: "t1", Caller: "frank"}, Limit: 2},
			&Acquire{RequestID: "s4", Resources: []string{"pool"}, Owner: "o12", TTL: 10 * time.Second,
				SecretHash: secret("s4"), Attempt: "t1", Caller: "frank"}, // refused: a lock on a semaphore
		}},
		{Time: at(11), Cmds: []Command{ // batch 11 is newer than the v10 snapshot fixture
			&QueueSend{Queue: "mail", Caller: "svc", Messages: []QueueMessage{{Key: "y", Body: []byte("y1")}, {Key: "z", Body: []byte("z1")}}},
			&QueueReceive{Queue: "mail", Max: 2, Caller: "svc/w1", RequestID: "rcv-1"}, // x1, y1 (z1 stays): a receipt in the snapshot
			&QueueReceive{Queue: "mail", Max: 2, Caller: "svc/w1", RequestID: "rcv-1"}, // the retry: the same two
		}},
		{Time: at(12), Cmds: []Command{ // batch 12 is newer than the v12 snapshot fixture: the ID kinds
			&QueueCreate{Queue: "tmp", Settings: QueueSettings{MaxReceives: 1}, Caller: "svc", RequestID: "qc1"},
			&QueueCreate{Queue: "tmp", Settings: QueueSettings{MaxReceives: 1}, Caller: "svc", RequestID: "qc1"}, // the retry
			&QueueSend{Queue: "tmp", Caller: "svc", Messages: []QueueMessage{{Key: "k1", Body: []byte("t1")}, {Key: "k2", Body: []byte("t2")}}},
			&QueueReceive{Queue: "tmp", Max: 2, Caller: "svc/w2"},                                                            // tokens 73, 74
			&QueueNack{Queue: "tmp", Seq: 1, Token: 73, Settler: Settler{Consumer: "svc/w2", Bound: true}, RequestID: "nk1"}, // dead
			&QueueNack{Queue: "tmp", Seq: 2, Token: 74, Settler: Settler{Consumer: "svc/w2", Bound: true}, RequestID: "nk2"}, // dead
			&QueueRedrive{Queue: "tmp", Max: 1, Actor: "admin", RequestID: "rd1"},                                            // moves t1
			&QueuePurge{Queue: "tmp", Actor: "admin", Reason: "cleanup", RequestID: "pg1"},                                   // drops t1 and t2
			&QueueDelete{Queue: "tmp", Actor: "admin", Reason: "retired", RequestID: "dl1"},
			&IdemBegin{Key: "pay/3", Fingerprint: secret("body3"), Owner: "api", TTL: 10 * time.Second,
				SecretHash: secret("i3"), Caller: "svc"}, // attempt 75
			&IdemAbandon{Key: "pay/3", Release: Release{RequestID: "ab1", LeaseID: 75, SecretHash: secret("i3"), Caller: "svc"}},
		}},
		{Time: at(13), Cmds: []Command{ // batch 13 is newer than the v14 snapshot fixture: barriers
			&BarrierCreate{Name: "phase", Type: leasehold.BarrierCyclic, Parties: 3, Timeout: time.Minute, Caller: "svc"},
			&BarrierArrive{RequestID: "a1", Name: "phase", Participant: "p1", TTL: 10 * time.Second, SecretHash: secret("p1"), Caller: "w"},
			&BarrierArrive{RequestID: "a2", Name: "phase", Participant: "p2", TTL: 10 * time.Second, SecretHash: secret("p2"), Caller: "w"},
			&BarrierCreate{Name: "pair", Type: leasehold.BarrierCyclic, Parties: 2, Caller: "svc"},
			&BarrierArrive{RequestID: "b1", Name: "pair", Participant: "q1", TTL: 10 * time.Second, SecretHash: secret("q1"), Caller: "w"},
			&BarrierArrive{RequestID: "b2", Name: "pair", Participant: "q2", TTL: 10 * time.Second, SecretHash: secret("q2"), Caller: "w"}, // trips
			&BarrierCreate{Name: "latch", Type: leasehold.BarrierLatch, Parties: 3, Caller: "svc"},
			&BarrierCountDown{RequestID: "c1", Name: "latch", Count: 2, Caller: "w"},
			&BarrierCreate{Name: "done", Type: leasehold.BarrierLatch, Parties: 1, Caller: "svc"},
			&BarrierCountDown{RequestID: "c2", Name: "done", Count: 1, Caller: "w"}, // trips, stays tripped
			&BarrierReset{RequestID: "r1", Name: "pair", Caller: "svc"},             // phase 2 broken
			&BarrierCreate{Name: "gone", Type: leasehold.BarrierCyclic, Parties: 2, Caller: "svc"},
			&BarrierDelete{RequestID: "d1", Name: "gone", Caller: "svc"},
			&BarrierTimeout{Name: "phase", Phase: 7}, // stale
		}},
	}
}

func goldenPaths() (log, snap string) {
	return "testdata/current-v3.log.hex", "testdata/current-v15.snapshot.hex"
}

// encodeV2 is b as batch version 2 wrote it: each command's body without
// the body version that version 3 puts before it, but for the kinds whose
// bodies carried it already (kindRow.inBody: the barriers').
func encodeV2(b *Batch) []byte {
	e := encoder{}
	e.byte1(2)
	e.varint(b.Time)
	e.uvarint(uint64(len(b.Cmds)))
	for _, c := range b.Cmds {
		var body encoder
		if row := rowOf(c.Kind()); row.inBody {
			body.byte1(row.version)
		}
		c.encode(&body)
		e.byte1(byte(c.Kind()))
		e.uvarint(uint64(len(body.b)))
		e.b = append(e.b, body.b...)
	}
	return e.b
}

// logHex renders entries, numbered from 1, as the log fixtures hold them.
func logHex(batches []*Batch, encode func(*Batch) []byte) string {
	var out strings.Builder
	for i, b := range batches {
		fmt.Fprintf(&out, "%d %x\n", i+1, encode(b))
	}
	return out.String()
}

// readLogHex reads a log fixture: one entry a line.
func readLogHex(t testing.TB, path string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		_, hx, _ := strings.Cut(line, " ")
		data, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// pinLog checks batches against their log fixtures: current holds their
// encoding (rewritten with LEASEHOLD_WRITE_GOLDEN=1; it reports true
// then), and legacy, if named, the batch version 2 one, which is the same
// bodies without their body versions and still decodes to the same
// commands. It returns the current fixture's entries.
func pinLog(t *testing.T, batches []*Batch, current, legacy string) (entries [][]byte, rewritten bool) {
	t.Helper()
	got := logHex(batches, func(b *Batch) []byte { return b.Encode(nil) })
	if os.Getenv("LEASEHOLD_WRITE_GOLDEN") == "1" {
		if err := os.WriteFile(current, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return nil, true
	}
	if want, err := os.ReadFile(current); err != nil || got != string(want) {
		t.Fatalf("log entries of batch version %d differ from %s (%v):\n got %s\nwant %s", batchVersion, current, err, got, want)
	}
	entries = readLogHex(t, current)
	if legacy == "" {
		return entries, false
	}
	if want, err := os.ReadFile(legacy); err != nil || logHex(batches, encodeV2) != string(want) {
		t.Fatalf("%s is not the entries as batch version 2 wrote them (%v)", legacy, err)
	}
	for i, old := range readLogHex(t, legacy) {
		if old[0] != 2 {
			t.Fatalf("%s entry %d has version %d, want 2", legacy, i+1, old[0])
		}
		a, errA := DecodeBatch(old)
		b, errB := DecodeBatch(entries[i])
		if errA != nil || errB != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("entry %d of %s decodes otherwise than its batch version %d encoding (%v, %v):\n%#v\n%#v", i+1, legacy, batchVersion, errA, errB, a, b)
		}
	}
	return entries, false
}

// The log entries and the snapshot the current code writes for the golden
// entries are the bytes the fixtures hold, and the fixture snapshot
// restores to a state that writes it again.
func TestCurrentFormatsUnchanged(t *testing.T) {
	s := New(DefaultConfig(), nil)
	for i, b := range goldenEntries() {
		ix := uint64(i + 1)
		dec, err := DecodeBatch(b.Encode(nil))
		if err != nil {
			t.Fatalf("entry %d: %v", ix, err)
		}
		s.Apply(ix, dec)
	}
	snap := s.Snapshot()
	logPath, snapPath := goldenPaths()
	if _, rewritten := pinLog(t, goldenEntries(), logPath, "testdata/legacy-v2-named.log.hex"); rewritten {
		if err := os.WriteFile(snapPath, []byte(hex.EncodeToString(snap)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Skip("fixtures rewritten")
	}
	want := legacySnapshotBytes(t, strings.TrimPrefix(snapPath, "testdata/"))
	if !bytes.Equal(snap, want) {
		t.Fatalf("a snapshot of version %d differs from %s:\n got %x\nwant %x", snapVersion, snapPath, snap, want)
	}
	restored, err := Restore(want, DefaultConfig(), nil)
	if err != nil {
		t.Fatalf("restore %s: %v", snapPath, err)
	}
	if !bytes.Equal(restored.Snapshot(), want) {
		t.Fatalf("%s does not round-trip", snapPath)
	}
	// The fixture holds something in every section, or it pins nothing.
	c := restored.Counts()
	if c.Leases == 0 || c.Waiters == 0 || c.Blocked == 0 || c.Dedup == 0 || len(restored.audit) == 0 || restored.kv.items.len() == 0 || len(restored.kv.bound) == 0 || len(restored.Elections("")) == 0 || restored.idem.records.len() < 2 ||
		restored.queues.byName.len() < 2 || restored.queues.byName.at("jobs").depth < 3 || len(restored.queues.byName.at("jobs").inflight) == 0 ||
		len(restored.queues.byName.at("jobs").dead) == 0 || len(restored.queues.byName.at("jobs").dedupLog) == 0 ||
		restored.groups.byName.len() == 0 || restored.GroupStats().Pending == 0 || restored.GroupStats().Members < 2 ||
		restored.sems.byName.len() == 0 || restored.sems.byName.at("pool").users != 3 || len(restored.queues.byName.at("mail").receipts) == 0 ||
		restored.LastToken() < 50 || restored.barriers.byName.len() < 4 || len(restored.barriers.byName.at("pair").ends) < 2 ||
		len(restored.barriers.byName.at("phase").arrivals) != 2 || !restored.barriers.byName.at("done").tripped {
		t.Fatalf("the golden state misses a section: %+v, audit %d, kv %d, last token %d",
			c, len(restored.audit), restored.kv.items.len(), restored.LastToken())
	}
}

// v14AsCurrent is the version-14 snapshot of the first twelve golden
// entries as this version writes the same state: an empty barriers
// section after the others.
func v14AsCurrent(t *testing.T) []byte {
	v14 := legacySnapshotBytes(t, "legacy-v14.snapshot.hex")
	return append(append([]byte(snapMagic+string(rune(snapVersion))), v14[len(snapMagic)+1:]...), 0)
}

// A node of this version reads the version-14 snapshot of the first
// twelve golden entries: it writes the same sections again, and an empty
// barriers section after them.
func TestReadsSnapshotVersion14(t *testing.T) {
	old, err := Restore(legacySnapshotBytes(t, "legacy-v14.snapshot.hex"), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := old.Snapshot(), v14AsCurrent(t); !bytes.Equal(got, want) {
		t.Fatalf("a restored version-14 snapshot writes\n%x\nwant\n%x", got, want)
	}
}

// withNewNames is a snapshot of before version 14 with each of its names
// of leasehold's own leases (a length byte, then "\x00group/..." or
// "\x00idem/...") replaced by the name it has now (legacyName): what this
// version writes for the same state.
func withNewNames(b []byte) []byte {
	var out []byte
	for {
		i := -1
		for _, p := range []string{legacyGroupPrefix, legacyIdemPrefix} {
			if j := bytes.Index(b, []byte(p)); j > 0 && (i < 0 || j < i) {
				i = j
			}
		}
		if i < 0 {
			return append(out, b...)
		}
		n := int(b[i-1]) // the fixtures' names are short: one length byte
		name := legacyName(string(b[i : i+n]))
		out = binary.AppendUvarint(append(out, b[:i-1]...), uint64(len(name)))
		out = append(out, name...)
		b = b[i+n:]
	}
}

// A node of this version reads the version-13 snapshot of the golden
// entries, and replays the log that made it (legacy-v2.log.hex, with the
// old Join and Begin kinds): both give the state the current code makes
// of the golden entries, byte for byte, leasehold's own leases named
// under leasehold.ReservedPrefix.
func TestReadsOldNames(t *testing.T) {
	current := v14AsCurrent(t)
	v13 := legacySnapshotBytes(t, "legacy-v13.snapshot.hex")
	if bytes.Contains(current, []byte(legacyGroupPrefix)) || !bytes.Contains(v13, []byte(legacyGroupPrefix)) ||
		!bytes.Contains(v13, []byte(legacyIdemPrefix)) {
		t.Fatal("the fixtures do not hold the names they are meant to: the test proves nothing")
	}
	old, err := Restore(v13, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(old.Snapshot(), current) {
		t.Fatalf("a restored version-13 snapshot writes\n%x\nwant\n%x", old.Snapshot(), current)
	}
	for _, r := range []string{GroupMemberResource("shards", "w2"), IdemResource("pay/2")} {
		if _, held := old.leases.holders.get(r); !held || !strings.HasPrefix(r, leasehold.ReservedPrefix) {
			t.Errorf("%q is not held after the restore: %v", r, old.Counts())
		}
	}
	replay := New(DefaultConfig(), nil)
	raw, err := os.ReadFile("testdata/legacy-v2.log.hex")
	if err != nil {
		t.Fatal(err)
	}
	oldKinds := 0
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		ixs, hx, _ := strings.Cut(line, " ")
		ix, _ := strconv.ParseUint(ixs, 10, 64)
		data, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := DecodeBatch(data)
		if err != nil {
			t.Fatalf("entry %d: %v", ix, err)
		}
		for _, c := range b.Cmds {
			if k := c.Kind(); k == KindGroupJoin || k == KindIdemBegin {
				oldKinds++
			}
		}
		replay.Apply(ix, b)
	}
	if oldKinds == 0 {
		t.Fatal("legacy-v2.log.hex has no Join or Begin of the old kinds: the test proves nothing")
	}
	if !bytes.Equal(replay.Snapshot(), current) {
		t.Fatal("replaying the log written before the reserved names gives another state than the current code's")
	}
}

// A node of this version reads the version-12 snapshot of the first
// eleven golden entries: it writes the same bytes again, as version 14 (a
// dedup record of the ID kinds, absent there, is what version 13 changed;
// the names of leasehold's own leases, version 14).
func TestReadsSnapshotVersion12(t *testing.T) {
	v12 := legacySnapshotBytes(t, "legacy-v12.snapshot.hex")
	old, err := Restore(v12, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := withNewNames(append(append([]byte(snapMagic+string(rune(snapVersion))), v12[len(snapMagic)+1:]...), 0)) // no barriers
	if got := old.Snapshot(); !bytes.Equal(got, want) {
		t.Fatalf("a restored version-12 snapshot writes\n%x\nwant\n%x", got, want)
	}
}

// A node of this version reads the version-10 snapshot of the first ten
// golden entries: it writes the same sections again, and an empty queue
// receipts section after them.
func TestReadsSnapshotVersion10(t *testing.T) {
	v10 := legacySnapshotBytes(t, "legacy-v10.snapshot.hex")
	old, err := Restore(v10, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte(snapMagic+string(rune(snapVersion))), v10[len(snapMagic)+1:]...)
	want = append(want, 0, 0) // no queue receipts, no barriers
	want = withNewNames(want)
	if got := old.Snapshot(); !bytes.Equal(got, want) {
		t.Fatalf("a restored version-10 snapshot writes\n%x\nwant\n%x", got, want)
	}
}

// A node of this version reads the version-9 snapshot of the first nine
// golden entries: it writes the same sections again, and an empty
// semaphores section after them.
func TestReadsSnapshotVersion9(t *testing.T) {
	v9 := legacySnapshotBytes(t, "legacy-v9.snapshot.hex")
	old, err := Restore(v9, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte(snapMagic+string(rune(snapVersion))), v9[len(snapMagic)+1:]...)
	want = append(want, 0, 0, 0, 0) // no semaphores (leases, waiters), no queue receipts, no barriers
	want = withNewNames(want)
	if got := old.Snapshot(); !bytes.Equal(got, want) {
		t.Fatalf("a restored version-9 snapshot writes\n%x\nwant\n%x", got, want)
	}
}

// A node of this version reads the version-8 snapshot of the first eight
// golden entries: it writes the same sections again, and empty groups and
// semaphores sections after them.
func TestReadsSnapshotVersion8(t *testing.T) {
	v8 := legacySnapshotBytes(t, "legacy-v8.snapshot.hex")
	old, err := Restore(v8, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte(snapMagic+string(rune(snapVersion))), v8[len(snapMagic)+1:]...)
	want = append(want, 0, 0, 0, 0, 0) // no groups, no semaphores (leases, waiters), no queue receipts, no barriers
	want = withNewNames(want)
	if got := old.Snapshot(); !bytes.Equal(got, want) {
		t.Fatalf("a restored version-8 snapshot writes\n%x\nwant\n%x", got, want)
	}
}

// A node of this version reads the version-7 snapshot of the first seven
// golden entries: it writes the same sections again, and an empty queues
// section after them.
func TestReadsSnapshotVersion7(t *testing.T) {
	v7 := legacySnapshotBytes(t, "legacy-v7.snapshot.hex")
	old, err := Restore(v7, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte(snapMagic+string(rune(snapVersion))), v7[len(snapMagic)+1:]...)
	want = append(want, 0, 0, 0, 0, 0, 0) // no queues, no groups, no semaphores (leases, waiters), no queue receipts, no barriers
	want = withNewNames(want)
	if got := old.Snapshot(); !bytes.Equal(got, want) {
		t.Fatalf("a restored version-7 snapshot writes\n%x\nwant\n%x", got, want)
	}
}

// A node of this version reads the version-6 snapshot of the first six
// golden entries: it writes the same sections again, and an empty
// idempotency section after them.
func TestReadsSnapshotVersion6(t *testing.T) {
	v6 := legacySnapshotBytes(t, "legacy-v6.snapshot.hex")
	old, err := Restore(v6, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte(snapMagic+string(rune(snapVersion))), v6[len(snapMagic)+1:]...)
	want = append(want, 0, 0, 0, 0, 0, 0, 0) // no idempotency keys, no queues, no groups, no semaphores, no queue receipts, no barriers
	if got := old.Snapshot(); !bytes.Equal(got, want) {
		t.Fatalf("a restored version-6 snapshot writes\n%x\nwant\n%x", got, want)
	}
}

// A node of this version reads the version-5 snapshot of the first five
// golden entries into the state those entries make.
func TestReadsSnapshotVersion5(t *testing.T) {
	s := New(DefaultConfig(), nil)
	for i, b := range goldenEntries()[:5] {
		s.Apply(uint64(i+1), b)
	}
	old, err := Restore(legacySnapshotBytes(t, "legacy-v5.snapshot.hex"), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	requireSameState(t, s, old)
}
