package service

import (
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold/api/leasehold"
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
	ring    []slot      // seq s lives at ring[s%len(ring)]; grows to cfg.Events
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
	return &Hub{cfg: cfg, ring: make([]slot, min(cfg.Events, 1024)), changed: make(chan struct{}),
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
		h.push(slotOf(&h.pending[i]))
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

func (h *Hub) push(e slot) {
	if h.next-h.first == uint64(len(h.ring)) && len(h.ring) < h.cfg.Events {
		h.grow()
	}
	n := uint64(len(h.ring))
	for h.next-h.first == n || (h.next > h.first && h.bytes+e.bytes() > h.cfg.Bytes) {
		old := &h.ring[h.first%n]
		h.floor = max(h.floor, old.Index)
		h.bytes -= old.bytes()
		*old = slot{}
		h.first++
	}
	h.ring[h.next%n] = e
	h.bytes += e.bytes()
	h.next++
}

// grow doubles the ring (up to its limit): it starts small, so an idle
// node does not hold the whole ring.
func (h *Hub) grow() {
	ring := make([]slot, min(2*len(h.ring), h.cfg.Events))
	for s := h.first; s < h.next; s++ {
		ring[s%uint64(len(ring))] = h.ring[s%uint64(len(h.ring))]
	}
	h.ring = ring
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
