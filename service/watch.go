package service

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// The watch hub: every node keeps the change events of its own applied
// log in a bounded ring, and serves watchers from it. Watchers share the
// ring: each has only a cursor into it, so a slow watcher costs no memory
// of its own; one that falls too far behind (more than its lag limit of
// events not yet examined, or off the ring's end) is cut off with an
// error naming the index to resume from.
//
// Events of one log entry enter the ring together, when the entry has
// been applied (Applied), so a watcher is handed whole entries: a resume
// from the last index it saw never misses or repeats an event.

// HubConfig bounds a node's event history.
type HubConfig struct {
	// Events is the most events the ring keeps (default 100,000).
	Events int
	// Bytes bounds the keys, values and names the kept events hold
	// (default 64 MiB).
	Bytes int
	// MaxLag is the most events a watcher may be behind the newest before
	// it is cut off (default: half the ring, so it can still resume).
	MaxLag int
}

// DefaultHubConfig is the configuration for a node.
func DefaultHubConfig() HubConfig {
	return HubConfig{Events: 100_000, Bytes: 64 << 20}
}

// Hub is a node's event history and its watchers. It receives the state
// machine's events (cluster.History) and is safe for concurrent use.
type Hub struct {
	cfg HubConfig

	mu      sync.Mutex
	ring    []fsm.Event // seq s lives at ring[s%len(ring)]; grows to cfg.Events
	first   uint64      // seq of the oldest kept event
	next    uint64      // seq the next event gets
	bytes   int         // held by the kept events
	floor   uint64      // every event after this index is kept
	applied uint64      // the last index applied on this node
	pending []fsm.Event // events of the entry being applied
	changed chan struct{}
	// watchers are those running, for cutting off the laggards.
	watchers map[*Watcher]struct{}

	delivered atomic.Uint64
	cutOff    atomic.Uint64
}

// NewHub returns an empty hub.
func NewHub(cfg HubConfig) *Hub {
	d := DefaultHubConfig()
	if cfg.Events <= 0 {
		cfg.Events = d.Events
	}
	if cfg.Bytes <= 0 {
		cfg.Bytes = d.Bytes
	}
	if cfg.MaxLag <= 0 || cfg.MaxLag > cfg.Events {
		cfg.MaxLag = max(cfg.Events/2, 1)
	}
	return &Hub{cfg: cfg, ring: make([]fsm.Event, min(cfg.Events, 1024)), changed: make(chan struct{}),
		watchers: make(map[*Watcher]struct{})}
}

// Event is called by the state machine for every change (fsm.EventSink).
// It is held back until its entry has been applied.
func (h *Hub) Event(e fsm.Event) {
	h.mu.Lock()
	h.pending = append(h.pending, e)
	h.mu.Unlock()
}

// Applied is called after the entry at index has been applied: its events
// join the history and the watchers are woken.
func (h *Hub) Applied(index uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.pending {
		h.push(h.pending[i])
		h.pending[i] = fsm.Event{}
	}
	h.pending = h.pending[:0]
	h.applied = max(h.applied, index)
	for w := range h.watchers {
		if lag := h.next - w.cursor; lag > uint64(h.cfg.MaxLag) {
			w.cut(leasehold.Errorf(leasehold.CodeLimit,
				"this watcher fell %d events behind (the limit is %d) and was cut off: resume from index %d", lag, h.cfg.MaxLag, w.pos))
		}
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// Restored is called when a snapshot at index replaced the state: the
// events before it are not known here, so the history restarts there.
// Watchers that had not reached index are cut off.
func (h *Hub) Restored(index uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.ring)
	h.first, h.bytes, h.pending = h.next, 0, h.pending[:0]
	h.floor, h.applied = index, max(h.applied, index)
	for w := range h.watchers {
		if w.pos < index {
			w.cut(leasehold.Errorf(leasehold.CodeOutOfRange,
				"this node replaced its state with a snapshot at index %d and keeps no events before it: resume from index %d on another node, or from %d here",
				index, w.pos, index))
		}
		w.cursor = h.next
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *Hub) push(e fsm.Event) {
	if h.next-h.first == uint64(len(h.ring)) && len(h.ring) < h.cfg.Events {
		h.grow()
	}
	n := uint64(len(h.ring))
	for h.next-h.first == n || (h.next > h.first && h.bytes+eventBytes(&e) > h.cfg.Bytes) {
		old := &h.ring[h.first%n]
		h.floor = max(h.floor, old.Index)
		h.bytes -= eventBytes(old)
		*old = fsm.Event{}
		h.first++
	}
	h.ring[h.next%n] = e
	h.bytes += eventBytes(&e)
	h.next++
}

// grow doubles the ring (up to its limit): it starts small, so an idle
// node does not hold the whole ring.
func (h *Hub) grow() {
	ring := make([]fsm.Event, min(2*len(h.ring), h.cfg.Events))
	for s := h.first; s < h.next; s++ {
		ring[s%uint64(len(ring))] = h.ring[s%uint64(len(h.ring))]
	}
	h.ring = ring
}

func eventBytes(e *fsm.Event) int {
	n := len(e.Key) + len(e.Value) + len(e.Owner) + len(e.Operation)
	for _, r := range e.Resources {
		n += len(r)
	}
	return n
}

// HubStats is what the hub reports for metrics.
type HubStats struct {
	Watchers  int
	Delivered uint64 // events handed to watchers
	CutOff    uint64 // watchers cut off for falling behind or by a restore
	MaxLag    uint64 // events the furthest-behind watcher has yet to examine
	Kept      int    // events in the ring
	Oldest    uint64 // the oldest index a watch can start from
	Applied   uint64
}

// Stats reads the hub's figures.
func (h *Hub) Stats() HubStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := HubStats{Watchers: len(h.watchers), Delivered: h.delivered.Load(), CutOff: h.cutOff.Load(),
		Kept: int(h.next - h.first), Oldest: h.floor, Applied: h.applied}
	for w := range h.watchers {
		s.MaxLag = max(s.MaxLag, h.next-w.cursor)
	}
	return s
}

// WatchRequest says what a watcher wants.
type WatchRequest struct {
	// Prefixes select events whose resources (any of them) or key start
	// with one of them; none selects every event.
	Prefixes []string
	// From: the watcher receives the events after this index. Ignored if
	// Now is set.
	From uint64
	// Now starts at the last index this node applied.
	Now bool
	// Renewed includes renewals, which are left out by default.
	Renewed bool
}

// Batch is the watched events of one log entry (all with Index), or, with
// no events, a progress mark: every watched event up to Index has been
// delivered, so a watcher may resume from Index.
type Batch struct {
	Index  uint64
	Events []fsm.Event
}

// Watcher is one watch on a hub. Read Batches until it closes, then Err
// says why; Close ends it early.
type Watcher struct {
	h    *Hub
	req  WatchRequest
	out  chan Batch
	stop chan struct{} // closed by cut or Close
	once sync.Once
	err  error // set before stop closes

	// Guarded by h.mu.
	cursor uint64 // the seq of the next event to examine
	pos    uint64 // every watched event up to this index was delivered
	told   uint64 // the cursor when the last batch was taken
	start  uint64
}

// Watch starts a watcher. It fails with CodeOutOfRange if From is older
// than the history this node keeps, naming the oldest index it can resume
// from. The watcher ends when ctx does (Err is then ctx's error).
func (s *Service) Watch(ctx context.Context, req WatchRequest) (*Watcher, error) {
	return s.hub.Watch(ctx, req)
}

// Watch is Service.Watch.
func (h *Hub) Watch(ctx context.Context, req WatchRequest) (*Watcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	from := req.From
	if req.Now {
		from = h.applied
	}
	if from < h.floor {
		return nil, leasehold.Errorf(leasehold.CodeOutOfRange,
			"index %d is older than the events this node keeps: the oldest index a watch can resume from is %d", from, h.floor)
	}
	w := &Watcher{h: h, req: req, out: make(chan Batch), stop: make(chan struct{}), pos: from, start: from}
	// The first kept event after from: indexes never decrease along the ring.
	lo, hi := h.first, h.next
	for lo < hi {
		mid := lo + (hi-lo)/2
		if h.ring[mid%uint64(len(h.ring))].Index <= from {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	w.cursor, w.told = lo, lo
	h.watchers[w] = struct{}{}
	go w.pump(ctx)
	return w, nil
}

// Start is the index the watcher started after.
func (w *Watcher) Start() uint64 { return w.start }

// Batches delivers the watched events, one log entry at a time, in log
// order, and progress marks while nothing watched happens. It closes when
// the watcher ends.
func (w *Watcher) Batches() <-chan Batch { return w.out }

// Err says why Batches closed: the context's error, or a *leasehold.Error
// that names the index to resume from (CodeLimit: the watcher fell too far
// behind; CodeOutOfRange: a snapshot replaced this node's history).
func (w *Watcher) Err() error {
	select {
	case <-w.stop:
		return w.err
	default:
		return nil
	}
}

// Close ends the watcher.
func (w *Watcher) Close() { w.cut(context.Canceled) }

func (w *Watcher) cut(err error) {
	w.once.Do(func() {
		w.err = err
		if leasehold.CodeOf(err) != leasehold.CodeUnknown {
			w.h.cutOff.Add(1)
		}
		close(w.stop)
	})
}

// progressEvery is how many events a watcher may pass over without one it
// watches before it is told of its progress (a Batch with no events): a
// resume from there stays well within the history.
const progressEvery = 1024

type step uint8

const (
	stepSend   step = iota // send the batch
	stepSkip               // examined an entry with nothing watched
	stepWait               // caught up: wait for changed
	stepFellOf             // the cursor fell off the ring
)

// pump hands the watcher its events: it examines the ring from its cursor,
// one entry at a time, and sends what matches.
func (w *Watcher) pump(ctx context.Context) {
	h := w.h
	defer func() {
		h.mu.Lock()
		delete(h.watchers, w)
		h.mu.Unlock()
		close(w.out)
	}()
	for {
		h.mu.Lock()
		b, st, changed := w.nextLocked()
		h.mu.Unlock()
		switch st {
		case stepFellOf:
			w.cut(leasehold.Errorf(leasehold.CodeOutOfRange,
				"this watcher fell off the end of the node's event history: resume from index %d on a node that keeps it", w.pos))
			return
		case stepSkip:
			continue
		case stepWait:
			select {
			case <-changed:
				continue
			case <-w.stop:
				return
			case <-ctx.Done():
				w.cut(ctx.Err())
				return
			}
		}
		select {
		case w.out <- b:
			h.delivered.Add(uint64(len(b.Events)))
			h.mu.Lock()
			w.pos = max(w.pos, b.Index)
			h.mu.Unlock()
		case <-w.stop:
			return
		case <-ctx.Done():
			w.cut(ctx.Err())
			return
		}
	}
}

// nextLocked takes the watched events of the next entry from the cursor,
// or a progress mark when one is due.
func (w *Watcher) nextLocked() (Batch, step, <-chan struct{}) {
	h := w.h
	if w.cursor < h.first {
		return Batch{}, stepFellOf, nil
	}
	n := uint64(len(h.ring))
	if w.cursor == h.next {
		// Every event up to the applied index has been examined.
		w.pos = max(w.pos, h.applied)
		if w.cursor-w.told >= progressEvery {
			w.told = w.cursor
			return Batch{Index: w.pos}, stepSend, nil
		}
		return Batch{}, stepWait, h.changed
	}
	b := Batch{Index: h.ring[w.cursor%n].Index}
	for ; w.cursor < h.next && h.ring[w.cursor%n].Index == b.Index; w.cursor++ {
		if e := &h.ring[w.cursor%n]; w.wants(e) {
			b.Events = append(b.Events, *e)
		}
	}
	if len(b.Events) > 0 {
		w.told = w.cursor
		return b, stepSend, nil
	}
	w.pos = max(w.pos, b.Index)
	if w.cursor-w.told >= progressEvery {
		w.told = w.cursor
		return b, stepSend, nil
	}
	return Batch{}, stepSkip, nil
}

func (w *Watcher) wants(e *fsm.Event) bool {
	if e.Index <= w.start || (e.Kind == fsm.EventRenewed && !w.req.Renewed) {
		return false
	}
	if len(w.req.Prefixes) == 0 {
		return true
	}
	for _, p := range w.req.Prefixes {
		if e.Key != "" && strings.HasPrefix(e.Key, p) {
			return true
		}
		for _, r := range e.Resources {
			if strings.HasPrefix(r, p) {
				return true
			}
		}
	}
	return false
}
