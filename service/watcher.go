package service

import (
	"context"
	"strings"
	"sync"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// A watcher reads the hub's ring through its own cursor, one log entry at
// a time, in its own goroutine (pump).

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
	Events []Event
}

// Event is one applied change, as a watcher sees it. It carries what a
// watcher may see and never a lease's secret or its hash. Slices are
// shared with the node's history: read them, never change them.
type Event struct {
	Index uint64 // the log index of the entry that made the change
	// Kind says what changed: granted, renewed, released, expired,
	// force_released, queued, withdrawn, put, deleted, leader_changed,
	// group_changed, group_assigned, group_revoking, group_removed.
	Kind string
	// Reason is why a lease ended (the end events): released, expired,
	// canceled, forced.
	Reason string
	// Lease events, and queued / withdrawn (whose LeaseID and Token are
	// 0). leader_changed: the election is Resources[0], the leader its
	// lease. put: the lease the key is now bound to; deleted: the lease
	// whose end deleted it (0: a plain delete).
	LeaseID   uint64
	Token     uint64
	Resources []string
	Owner     string
	Operation string
	// put and deleted.
	Key     string
	Value   []byte // put: the new value; leader_changed: the leader's value
	Version uint64 // put: the new version; deleted: the version removed
	// Group events: the group, and the partition (group_changed: the
	// count). LeaseID, Resources and Owner are the member's session.
	Group     string
	Partition uint32
}

// The kinds of the events the service picks out for its callers.
var (
	kindLeaderChanged = fsm.EventLeaderChanged.String()
	kindGroupChanged  = fsm.EventGroupChanged.String()
	kindGroupAssigned = fsm.EventGroupAssigned.String()
	kindGroupRevoking = fsm.EventGroupRevoking.String()
	kindGroupRemoved  = fsm.EventGroupRemoved.String()
	kindReleased      = fsm.EventReleased.String()
	kindExpired       = fsm.EventExpired.String()
	kindForceReleased = fsm.EventForceReleased.String()
)

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
			b.Events = append(b.Events, e.event())
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

func (w *Watcher) wants(e *slot) bool {
	if e.Index <= w.start || (e.Kind == fsm.EventRenewed && !w.req.Renewed) {
		return false
	}
	if len(w.req.Prefixes) == 0 {
		return true
	}
	for _, p := range w.req.Prefixes {
		if k := e.key(); k != "" && strings.HasPrefix(k, p) {
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
