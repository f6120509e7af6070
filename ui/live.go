package ui

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// Live pages. A page with live parts names its event stream (page.Live,
// /ui/events?view=NAME&...its own query); static/dash.js opens it with an
// EventSource and puts each pushed part in place, and polls the parts'
// own URLs instead when the stream is refused or EventSource is missing.
// The stream pushes a view's parts when the node's watch (read with the
// viewer's token, so within its prefixes) shows a change, at each chart
// sample, or on a timer for ages and countdowns.

// A liveView is one page's live parts and what pushes them.
type liveView struct {
	// parts renders each part by its name (a data-live attribute).
	parts func(d *Dashboard, r *http.Request, s *session) (map[string]string, error)
	// watch: the prefixes whose changes push the parts (nil: none);
	// renewed includes renewals.
	watch   func(r *http.Request, s *session) []string
	renewed bool
	samples bool          // push at each chart sample
	every   time.Duration // push at least this often (0: never)
	// nodeWide views are the whole node's figures (see nodeWide).
	nodeWide bool
}

var liveViews = map[string]liveView{
	"leases":    {parts: leasesTable.live, watch: pagePrefix, every: 5 * time.Second},
	"elections": {parts: electionsTable.live, watch: pagePrefix, every: 5 * time.Second},
	"lease":     {parts: (*Dashboard).timelineLive, watch: pageResource, renewed: true},
	"cluster":   {parts: clusterTable.live, every: 2 * time.Second},
	"charts":    {parts: (*Dashboard).chartsLive, samples: true, nodeWide: true},
	"queue":     {parts: (*Dashboard).chartsLive, samples: true},
	"group":     {parts: (*Dashboard).chartsLive, samples: true},
}

// Bounds of the event streams: how many at once, and per viewer (a
// browser opens one per tab); how long one lasts before the browser
// reconnects (and is identified again); how long a write may block; how
// often one is checked and kept alive; and the least time between pushes,
// so a busy node costs each stream at most a few renders a second.
const (
	maxStreams          = 64
	maxStreamsPerViewer = 8
	streamMaxAge        = 10 * time.Minute
	streamWriteTimeout  = 10 * time.Second
	streamKeepAlive     = 15 * time.Second
	streamPushMin       = 500 * time.Millisecond
)

// errSessionEnded ends the streams of a browser that logged out, or of a
// token the node no longer accepts as it did.
var errSessionEnded = errors.New("Your session has ended: log in again.")

// liveURL is the event stream of view, with the page's query q (which the
// view's parts read as the page does).
func liveURL(view string, q url.Values) string {
	q = maps.Clone(q)
	if q == nil {
		q = url.Values{}
	}
	q.Set("view", view)
	return "/ui/events?" + q.Encode()
}

func pagePrefix(r *http.Request, s *session) []string { return []string{s.prefix(r)} }
func pageResource(r *http.Request, s *session) []string {
	return []string{r.URL.Query().Get("resource")}
}

// streams counts the open event streams and ends a browser's at logout.
type streams struct {
	mu        sync.Mutex
	n         int
	byViewer  map[string]int
	byBrowser map[string]map[*context.CancelCauseFunc]struct{}
}

// admit counts a stream in, or says why not.
func (st *streams) admit(s *session, cancel *context.CancelCauseFunc) (release func(), refused string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.n >= maxStreams:
		return nil, fmt.Sprintf("this node serves %d live dashboard streams already (the limit): the page polls instead", maxStreams)
	case st.byViewer[s.Name] >= maxStreamsPerViewer:
		return nil, fmt.Sprintf("%s has %d live dashboard streams open already (the limit): the page polls instead", s.Name, maxStreamsPerViewer)
	}
	if st.byViewer == nil {
		st.byViewer, st.byBrowser = map[string]int{}, map[string]map[*context.CancelCauseFunc]struct{}{}
	}
	st.n++
	st.byViewer[s.Name]++
	if st.byBrowser[s.CSRF] == nil {
		st.byBrowser[s.CSRF] = map[*context.CancelCauseFunc]struct{}{}
	}
	st.byBrowser[s.CSRF][cancel] = struct{}{}
	return func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.n--
		if st.byViewer[s.Name]--; st.byViewer[s.Name] == 0 {
			delete(st.byViewer, s.Name)
		}
		if delete(st.byBrowser[s.CSRF], cancel); len(st.byBrowser[s.CSRF]) == 0 {
			delete(st.byBrowser, s.CSRF)
		}
	}, ""
}

// end ends the streams of the browser whose form token is csrf.
func (st *streams) end(csrf string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for cancel := range st.byBrowser[csrf] {
		(*cancel)(errSessionEnded)
	}
}

// events is the event stream of a live view (text/event-stream).
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request, s *session) {
	v, ok := liveViews[r.URL.Query().Get("view")]
	if !ok {
		http.Error(w, "view names no live page", http.StatusBadRequest)
		return
	}
	stream := func(w http.ResponseWriter, r *http.Request, s *session) { d.stream(w, r, s, v) }
	if v.nodeWide {
		stream = d.nodeWide(stream)
	}
	stream(w, r, s)
}

func (d *Dashboard) stream(w http.ResponseWriter, r *http.Request, s *session, v liveView) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	release, refused := d.streams.admit(s, &cancel)
	if refused != "" {
		w.Header().Set("Retry-After", "60")
		http.Error(w, refused, http.StatusServiceUnavailable)
		return
	}
	defer release()
	ctx, stopAge := context.WithTimeout(ctx, streamMaxAge)
	defer stopAge()
	stop := context.AfterFunc(d.stopped, func() { cancel(errors.New("the node is shutting down")) })
	defer stop()

	changes := make(chan struct{}, 1) // a change since the last push
	watched := make(chan struct{})
	if v.watch != nil {
		next, err := d.startWatch(ctx, s, v.watch(r, s), v.renewed)
		if err != nil {
			status, msg := apiError(err)
			http.Error(w, msg, status)
			return
		}
		go func() {
			defer close(watched)
			next(changes)
			cancel(errors.New("the watch ended")) // the browser reconnects and watches again
		}()
	} else {
		close(watched)
	}
	defer func() { cancel(nil); <-watched }()

	// The page was rendered a moment ago: its parts are pushed once now,
	// after the watch began, so no change since is missed. A view the API
	// refuses this viewer is refused here, before the stream starts.
	first, err := v.parts(d, r, s)
	if err != nil {
		status, msg := apiError(err)
		http.Error(w, msg, status)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy must not hold events back
	rc := http.NewResponseController(w)
	send := func(text string) bool {
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write([]byte(text)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	push := func() bool {
		parts, err := v.parts(d, r, s)
		if err != nil {
			_, msg := apiError(err)
			return send(sseEvent("failed", msg))
		}
		return send(sseEvents(parts))
	}
	if !send("retry: 2000\n\n" + sseEvents(first)) {
		return
	}
	var tick <-chan time.Time
	if v.every > 0 {
		t := time.NewTicker(v.every)
		defer t.Stop()
		tick = t.C
	}
	alive := time.NewTicker(streamKeepAlive)
	defer alive.Stop()
	for {
		var sampled <-chan struct{}
		if v.samples {
			sampled = d.charts.changed()
		}
		select {
		case <-ctx.Done():
			if context.Cause(ctx) == errSessionEnded {
				send(sseEvent("ended", errSessionEnded.Error()))
			}
			return
		case <-alive.C:
			if !d.stillViewing(s) {
				send(sseEvent("ended", errSessionEnded.Error()))
				return
			}
			if !send(": keep-alive\n\n") {
				return
			}
			continue
		case <-changes:
		case <-sampled:
		case <-tick:
		}
		if !push() {
			return
		}
		select { // changes meanwhile wait in the channel: one push for all
		case <-ctx.Done():
		case <-time.After(streamPushMin):
		}
	}
}

// stillViewing says the node still accepts the session's token as it did
// when the stream began.
func (d *Dashboard) stillViewing(s *session) bool {
	v, err := d.cfg.Identify(s.token)
	return err == nil && v.CanView && v.Name == s.Name && v.CanAct == s.CanAct && slices.Equal(v.Prefixes, s.Prefixes)
}

// startWatch starts the node's watch of prefixes with the viewer's token
// and waits for its first message (where it starts). Then follow signals
// changes (without blocking: one pending is enough) for each batch of
// events it shows, until ctx ends or the watch does.
func (d *Dashboard) startWatch(ctx context.Context, s *session, prefixes []string, renewed bool) (follow func(chan<- struct{}), err error) {
	stream, err := d.watch.Watch(ctx, authed(s, &pb.WatchRequest{Prefixes: prefixes, Renewed: renewed}))
	if err != nil {
		return nil, err
	}
	if !stream.Receive() {
		err := stream.Err()
		stream.Close()
		if err == nil {
			err = errors.New("the watch ended at once")
		}
		return nil, err
	}
	return func(changes chan<- struct{}) {
		defer stream.Close()
		for stream.Receive() {
			if len(stream.Msg().Events) == 0 {
				continue // a progress mark
			}
			select {
			case changes <- struct{}{}:
			default:
			}
		}
	}, nil
}

// sseEvent is one server-sent event: a name and data of any lines.
func sseEvent(name, data string) string {
	var b strings.Builder
	b.WriteString("event: " + name + "\n")
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: " + strings.TrimSuffix(line, "\r") + "\n")
	}
	b.WriteString("\n")
	return b.String()
}

// sseEvents are the parts as events, by name.
func sseEvents(parts map[string]string) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		b.WriteString(sseEvent(name, parts[name]))
	}
	return b.String()
}

// The views' parts.

func (d *Dashboard) chartsLive(r *http.Request, s *session) (map[string]string, error) {
	c, err := d.chartsFor(r, s)
	if err != nil {
		return nil, err
	}
	return map[string]string{"charts": chartsJSONText(c)}, nil
}

// part renders the template tpl of page name as the part of that name.
func (d *Dashboard) part(name, tpl string, s *session, data any) (map[string]string, error) {
	text, err := d.text(name, tpl, page{session: s, Data: data})
	if err != nil {
		return nil, err
	}
	return map[string]string{tpl: text}, nil
}
