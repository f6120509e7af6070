package client

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

// Event is one change a watch reports, with the log index of the entry
// that made it. It never carries a lease's secret.
type Event struct {
	Index uint64
	// Kind: granted, renewed, released, expired, force_released, queued,
	// withdrawn, put, deleted, leader_changed.
	Kind string
	// Lease events: the lease and its resources (queued / withdrawn: the
	// waiting acquire's, LeaseID 0). leader_changed: the election is
	// Resources[0], LeaseID its leader's lease (0: none). put: the lease
	// the key is bound to; deleted: the lease whose end deleted it.
	LeaseID   uint64
	Token     uint64
	Resources []string
	Owner     string
	Operation string
	Reason    string // the end events: released, canceled, expired, forced
	Key       string
	Value     []byte // put: the new value; leader_changed: the leader's value
	Version   uint64 // put: the new version; deleted: the version removed
}

// WatchOption adjusts one Watch.
type WatchOption func(*watchOptions)

type watchOptions struct {
	from    *uint64
	renewed bool
}

// FromIndex starts the watch after log index i: every event after it is
// delivered (default: start now).
func FromIndex(i uint64) WatchOption { return func(o *watchOptions) { o.from = &i } }

// Renewals includes lease renewals, which are left out by default.
func Renewals() WatchOption { return func(o *watchOptions) { o.renewed = true } }

// Watch is a running watch: read Events until it closes, then Err says
// why.
type Watch struct {
	events chan Event
	done   chan struct{}
	err    error
	index  uint64 // guarded by done: read after it closes
}

// Events delivers the events in log order, each once, until the watch
// ends.
func (w *Watch) Events() <-chan Event { return w.events }

// Err waits for the watch to end and says why: nil if its context ended;
// ErrClosed after the client's Close; an error matching
// leasehold.ErrOutOfRange if no node keeps the events after the index it
// had reached (its message names the oldest index a node can resume
// from); one matching leasehold.ErrUnavailable if no node opened it
// within Config.Timeout (for a ctx without a deadline; once open, it
// resumes across outages until ctx ends); or one the server refused it
// with (leasehold.ErrPermission, leasehold.ErrInvalid).
func (w *Watch) Err() error {
	<-w.done
	return w.err
}

// Index is the log index the watch had reached when it ended: every event
// up to it was delivered, so a new watch FromIndex(Index()) goes on
// without a gap. It waits for the watch to end.
func (w *Watch) Index() uint64 {
	<-w.done
	return w.index
}

// Watch streams the changes to lease resources and KV keys that start with
// one of prefixes (none: everything) until ctx ends. Any node serves it
// from its own log; when that node fails or cuts the watch off, the watch
// moves to the next endpoint and resumes from the last index it saw, so
// the events arrive in log order with no gap and no repeat.
func (c *Client) Watch(ctx context.Context, prefixes []string, opts ...WatchOption) *Watch {
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	w := &Watch{events: make(chan Event, 64), done: make(chan struct{})}
	// Close ends the watch too (with ErrClosed).
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.bg, cancel)
	go func() {
		defer close(w.done)
		defer close(w.events)
		defer stop()
		defer cancel()
		w.err = c.watch(ctx, prefixes, o, w)
		if c.closed.Load() && w.err == nil {
			w.err = ErrClosed
		}
	}()
	return w
}

// watch runs the streams, one node after another, until ctx ends or an
// error no other node can help with.
func (c *Client) watch(ctx context.Context, prefixes []string, o watchOptions, w *Watch) error {
	from, started := o.from, o.from != nil
	if started {
		w.index = *from
	}
	var retry backoff
	outOfRange := 0 // nodes in a row that lack the history
	warned := false // since the last progress: one warning per outage
	// Until a stream first opens, the watch is bounded as a call is;
	// after that it resumes until ctx ends.
	octx, stop := c.bound(ctx, 0)
	defer stop()
	var last error
	for {
		if c.closed.Load() {
			return ErrClosed
		}
		i := int(c.cur.Load()) % len(c.nodes)
		req := connect.NewRequest(&pb.WatchRequest{Prefixes: prefixes, Renewed: o.renewed})
		if started {
			req.Msg.FromIndex = &w.index
		}
		if c.cfg.Token != "" {
			req.Header().Set("Authorization", "Bearer "+c.cfg.Token)
		}
		progressed, opened, err := c.stream(ctx, octx, &c.nodes[i], req, w, &started)
		if ctx.Err() != nil {
			return nil
		}
		if progressed {
			retry, outOfRange, warned = backoff{}, 0, false
		}
		if opened {
			stop()
			octx = ctx // no longer bounded
		}
		if octx.Err() != nil {
			return c.ended(octx, last)
		}
		e := api.FromConnect(err)
		last = e
		switch {
		case errors.Is(e, leasehold.ErrOutOfRange):
			// This node lacks the events after our index (it installed a
			// snapshot, or kept too few): another may still have them.
			if outOfRange++; outOfRange >= len(c.nodes) {
				return e
			}
		case err == nil, errors.Is(e, leasehold.ErrUnavailable), errors.Is(e, leasehold.ErrLimit),
			!connect.IsWireError(err):
			// The node went away, is shutting down, or cut us off for
			// reading too slowly: resume on the next.
		default:
			return e
		}
		if !warned {
			warned = true
			c.log.Warn("watch interrupted; resuming on the next endpoint from the last index seen",
				"endpoint", c.nodes[i].url, "index", w.index, "err", e)
		}
		if !c.moveOn(octx, i, retry.next()) {
			if ctx.Err() != nil {
				return nil
			}
			return c.ended(octx, e)
		}
	}
}

// stream reads one node's stream into w until it ends; progressed says it
// moved the index on (or started the watch), opened that it answered. Its
// first answer must come within RequestTimeout and before octx ends.
func (c *Client) stream(ctx, octx context.Context, e *endpoint, req *connect.Request[pb.WatchRequest], w *Watch,
	started *bool) (progressed, opened bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	open := opening(octx, e.url, c.cfg.RequestTimeout, cancel)
	defer open()
	s, err := e.watch.Watch(ctx, req)
	if err != nil {
		return false, false, streamErr(ctx, err)
	}
	defer s.Close()
	for s.Receive() {
		open()
		opened = true
		m := s.Msg()
		if *started && m.Index <= w.index {
			continue // nothing new (the opening mark of a resumed watch)
		}
		for _, ev := range m.Events {
			select {
			case w.events <- eventOf(ev):
			case <-ctx.Done():
				return progressed, opened, ctx.Err()
			}
		}
		w.index, *started, progressed = m.Index, true, true
	}
	if err := s.Err(); err != nil {
		return progressed, opened, streamErr(ctx, err)
	}
	return progressed, opened, fmt.Errorf("watch stream from %s ended", e.url)
}

func eventOf(e *pb.WatchEvent) Event {
	return Event{Index: e.Index, Kind: e.Kind, LeaseID: e.LeaseId, Token: e.Token, Resources: e.Resources,
		Owner: e.Owner, Operation: e.Operation, Reason: e.Reason, Key: e.Key, Value: e.Value, Version: e.Version}
}
