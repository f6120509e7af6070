package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"pgregory.net/rapid"
)

// Shared helpers for the fsm tests: a harness that stamps log indexes and
// batch times, a recording observer, and builders for commands.

// t0 is the batch time the harness starts at. It is far from zero on
// purpose: a zero batch time would make AcquiredAt the Unix epoch, which a
// snapshot cannot tell apart from "unset".
const t0 = int64(1_700_000_000) * int64(time.Second)

// secret returns a distinct, deterministic secret hash per name.
func secret(name string) [32]byte { return sha256.Sum256([]byte("secret:" + name)) }

// acq builds a valid acquire of resources with a 10s TTL; its secret is
// derived from the request ID (or "anon").
func acq(id string, resources ...string) *Acquire {
	sname := id
	if sname == "" {
		sname = "anon"
	}
	return &Acquire{
		RequestID:  id,
		Resources:  resources,
		Owner:      "owner-" + sname,
		Operation:  "op",
		TTL:        10 * time.Second,
		SecretHash: secret(sname),
	}
}

// keyOf is the key (Acquire.Key) of the acquire acq(id) or wacq(id)
// makes: no caller, the secret derived from id.
func keyOf(id string) string { return acq(id).Key() }

// wacq is acq with a wait bound of one minute.
func wacq(id string, resources ...string) *Acquire {
	c := acq(id, resources...)
	c.Wait = time.Minute
	return c
}

// resNames returns n distinct resource names.
func resNames(prefix string, n int) []string {
	rs := make([]string, n)
	for i := range rs {
		rs[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return rs
}

// recorder is an Observer that writes every event as one line, so tests
// can compare whole sequences.
type recorder struct {
	ev    []string
	timed armed // the countdowns armed (nil until the first)
}

func (r *recorder) add(format string, args ...any) { r.ev = append(r.ev, fmt.Sprintf(format, args...)) }

// showKey renders a waiter's key (Acquire.Key) for reading: the request
// ID, after its caller if it has one ("bob/r1"). A legacy key is the bare
// request ID already.
func showKey(key string) string {
	if key == "" || key[0] != 0 {
		return key
	}
	n, w := binary.Uvarint([]byte(key[1:]))
	caller := key[1+w : 1+w+int(n)]
	id := key[1+w+int(n)+16:]
	if caller == "" {
		return id
	}
	return caller + "/" + id
}

func (r *recorder) Granted(l *leasehold.Lease, key string) {
	r.add("granted lease=%d token=%d req=%s res=%v", l.ID, l.Token, showKey(key), l.Resources)
}
func (r *recorder) Renewed(l *leasehold.Lease, remaining time.Duration) {
	r.add("renewed lease=%d count=%d remaining=%v", l.ID, l.RenewCount, remaining)
}
func (r *recorder) Ended(l *leasehold.Lease, why EndReason) {
	r.add("ended lease=%d why=%v", l.ID, why)
}
func (r *recorder) WaitEnded(key string, res Result) {
	r.add("waitended req=%s %s", showKey(key), summarize(res))
}

// Arm writes a line for a waiter's and a lock-delay's countdown; a
// lease's goes with its grant or renewal.
func (r *recorder) Arm(c Countdown) {
	if r.timed == nil {
		r.timed = armed{}
	}
	r.timed.Arm(c)
	switch c.Key.Kind {
	case CountdownWait:
		r.add("queued req=%s wait=%v", showKey(c.Key.Name), c.After)
	case CountdownLockDelay:
		r.add("blocked res=%s token=%d delay=%v", c.Key.Name, c.Fire.(*Unblock).Token, c.After)
	}
}
func (r *recorder) Disarm(k CountdownKey) { r.timed.Disarm(k) }

// take returns the events recorded since the last take.
func (r *recorder) take() []string {
	ev := r.ev
	r.ev = nil
	return ev
}

// summarize renders the parts of a Result that tests compare.
func summarize(r Result) string {
	s := ""
	switch {
	case r.Err != nil:
		s = "err=" + leasehold.CodeOf(r.Err).String()
	case r.Lease != nil:
		s = fmt.Sprintf("lease=%d", r.Lease.ID)
	case r.Queued:
		s = "queued"
	default:
		s = "noop"
	}
	if r.Remaining != 0 {
		s += fmt.Sprintf(" remaining=%v", r.Remaining)
	}
	if r.Dup {
		s += " dup"
	}
	if r.ForeignSecret {
		s += " foreign-secret"
	}
	return s
}

// harness applies batches at increasing indexes and times.
type harness struct {
	t   testing.TB
	s   *State
	obs *recorder
	ix  uint64        // index of the last applied entry
	now int64         // time of the last applied entry
	dt  time.Duration // time step per entry
}

func newHarness(t testing.TB) *harness { return newHarnessCfg(t, DefaultConfig()) }

func newHarnessCfg(t testing.TB, cfg Config) *harness {
	obs := &recorder{}
	return &harness{t: t, s: New(cfg, obs), obs: obs, now: t0, dt: time.Second}
}

// apply applies one entry at the next index.
func (h *harness) apply(cmds ...Command) []Result {
	h.t.Helper()
	return h.applyAt(h.ix+1, cmds...)
}

// applyAt applies one entry at index ix (which must be larger than the last).
func (h *harness) applyAt(ix uint64, cmds ...Command) []Result {
	h.t.Helper()
	if ix <= h.ix {
		h.t.Fatalf("harness: index %d is not after %d", ix, h.ix)
	}
	h.ix = ix
	h.now += int64(h.dt)
	out := h.s.Apply(ix, &Batch{Time: h.now, Cmds: cmds})
	if len(out) != len(cmds) {
		h.t.Fatalf("Apply returned %d results for %d commands", len(out), len(cmds))
	}
	if h.s.LastIndex() != ix {
		h.t.Fatalf("LastIndex = %d after applying %d", h.s.LastIndex(), ix)
	}
	return out
}

// one applies a single command in its own entry.
func (h *harness) one(c Command) Result {
	h.t.Helper()
	return h.apply(c)[0]
}

// mustGrant applies an acquire alone and fails unless it is granted.
func (h *harness) mustGrant(c *Acquire) *leasehold.Lease {
	h.t.Helper()
	r := h.one(c)
	if r.Err != nil || r.Lease == nil {
		h.t.Fatalf("acquire %q %v: got %s (%v), want a grant", c.RequestID, c.Resources, summarize(r), r.Err)
	}
	return r.Lease
}

// mustQueue applies a waiting acquire alone and fails unless it queues.
func (h *harness) mustQueue(c *Acquire) {
	h.t.Helper()
	r := h.one(c)
	if !r.Queued || r.Err != nil || r.Lease != nil {
		h.t.Fatalf("acquire %q %v: got %s (%v), want queued", c.RequestID, c.Resources, summarize(r), r.Err)
	}
}

// holder returns the lease id holding resource, or 0.
func (h *harness) holder(resource string) uint64 {
	l, ok := h.s.Holder(resource)
	if !ok {
		return 0
	}
	return l.ID
}

// queue returns the request IDs waiting for resource, in order.
func (h *harness) queue(resource string) []string {
	var ids []string
	for i, w := range h.s.Waiters(resource) {
		if w.Position != i {
			h.t.Fatalf("waiter %q on %q has position %d, want %d", w.RequestID, resource, w.Position, i)
		}
		ids = append(ids, w.RequestID)
	}
	return ids
}

func release(l *leasehold.Lease, name string) *Release {
	return &Release{LeaseID: l.ID, SecretHash: secret(name)}
}

func renew(l *leasehold.Lease, name string) *Renew {
	return &Renew{LeaseID: l.ID, SecretHash: secret(name)}
}

// wantCode fails unless r carries an error of code c (CodeUnknown: no error).
func wantCode(t testing.TB, what string, r Result, c leasehold.Code) {
	t.Helper()
	got := leasehold.CodeOf(r.Err)
	if c == leasehold.CodeUnknown {
		if r.Err != nil {
			t.Fatalf("%s: unexpected error %v (code %v)", what, r.Err, got)
		}
		return
	}
	if r.Err == nil || got != c {
		t.Fatalf("%s: got %s (err %v), want code %v", what, summarize(r), r.Err, c)
	}
	if r.Lease != nil || r.Queued {
		t.Fatalf("%s: an error result also carries a lease or queued: %s", what, summarize(r))
	}
}

// wantEvents compares the recorder's events since the last take.
func wantEvents(t testing.TB, obs *recorder, want ...string) {
	t.Helper()
	got := obs.take()
	if !slices.Equal(got, want) {
		t.Fatalf("observer events:\n got: %q\nwant: %q", got, want)
	}
}

// armed keeps the countdowns a state armed and has not disarmed, as the
// leader's heap does. check fails unless they are exactly the ones the
// state rebuilds on a takeover (EachCountdown): a kind of countdown left
// out of the rebuild, or one never disarmed, shows here.
type armed map[CountdownKey]Command

func (a armed) Arm(c Countdown)       { a[c.Key] = c.Fire }
func (a armed) Disarm(k CountdownKey) { delete(a, k) }

// reset takes the countdowns of s, as a new leader does.
func (a armed) reset(s *State) {
	clear(a)
	s.EachCountdown(a.Arm)
}

func (a armed) check(t interface {
	Helper()
	Fatalf(string, ...any)
}, s *State) {
	t.Helper()
	rebuilt := armed{}
	s.EachCountdown(rebuilt.Arm)
	for k, c := range a {
		if r, ok := rebuilt[k]; !ok || !reflect.DeepEqual(r, c) {
			t.Fatalf("countdown %+v armed to fire %T %+v, but a takeover rebuilds it as %T %+v", k, c, c, r, r)
		}
	}
	for k, r := range rebuilt {
		if _, ok := a[k]; !ok {
			t.Fatalf("a takeover rebuilds countdown %+v (firing %T %+v), which the state never armed or disarmed", k, r, r)
		}
	}
}

// timedObserver is an Observer that keeps the countdowns armed.
type timedObserver struct {
	nopObserver
	armed
}

func newTimedObserver() *timedObserver { return &timedObserver{armed: armed{}} }

// plainMap is a cowMap's entries as a map, to compare.
func plainMap[K comparable, V any](m *cowMap[K, V]) map[K]V {
	out := make(map[K]V, m.len())
	m.each(func(k K, v V) bool { out[k] = v; return true })
	return out
}

// capturing takes, at random steps, a capture of the state (at most two
// out at once) and encodes it on another goroutine while the test goes on
// applying entries, as raft's Persist does; at a later step it checks
// that the capture encoded the state as it was when taken, byte for byte
// (a change made in place around a frozen map shows here, and under
// -race as a data race).
type capturing struct{ out []*heldCapture }

type heldCapture struct {
	snap *Snapshot
	want []byte
	got  bytes.Buffer
	done chan error
}

func (c *capturing) step(t *rapid.T, s *State) {
	if len(c.out) < 2 && rapid.IntRange(0, 3).Draw(t, "capture") == 0 {
		h := &heldCapture{snap: s.Capture(), want: s.Snapshot(), done: make(chan error, 1)}
		go func() {
			_, err := h.snap.WriteTo(&h.got)
			h.done <- err
		}()
		c.out = append(c.out, h)
	}
	if len(c.out) > 0 && rapid.IntRange(0, 3).Draw(t, "persist") == 0 {
		i := rapid.IntRange(0, len(c.out)-1).Draw(t, "which capture")
		c.finish(t, c.out[i])
		c.out = slices.Delete(c.out, i, i+1)
	}
}

// done finishes every capture still out.
func (c *capturing) done(t *rapid.T) {
	for _, h := range c.out {
		c.finish(t, h)
	}
	c.out = nil
}

func (c *capturing) finish(t *rapid.T, h *heldCapture) {
	t.Helper()
	if err := <-h.done; err != nil {
		t.Fatal(err)
	}
	h.snap.Release()
	if !bytes.Equal(h.got.Bytes(), h.want) {
		t.Fatalf("a capture encoded %d bytes unlike the %d of the state it was taken from", h.got.Len(), len(h.want))
	}
}
