package netfault

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Net is the faults between named hosts. A fault is said of the bytes
// going from one host to another; Net applies it to every proxy that
// carries them: the up direction of the connections the sender opened to
// the receiver, and the down direction of those the receiver opened to
// the sender. It is safe for concurrent use.
type Net struct {
	mu    sync.Mutex
	links map[link][]*Proxy // the connections link.from opens to link.to
	held  map[link]bool     // bytes from link.from to link.to are held
	shape Faults            // delay, jitter and loss of every link
	pairs map[link]Faults   // ... but these, set by ShapeBetween
}

// link is a direction between two hosts.
type link struct{ from, to string }

func NewNet() *Net {
	return &Net{links: map[link][]*Proxy{}, held: map[link]bool{}, pairs: map[link]Faults{}}
}

// Add says that p carries the connections host from opens to host to.
func (n *Net) Add(from, to string, p *Proxy) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := link{from, to}
	n.links[l] = append(n.links[l], p)
	p.Set(n.faults(from, to), n.faults(to, from))
}

// Hosts are the hosts named by any link, sorted.
func (n *Net) Hosts() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var hs []string
	for l := range n.links {
		hs = append(hs, l.from, l.to)
	}
	slices.Sort(hs)
	return slices.Compact(hs)
}

// Cut holds the bytes between a and b, both ways.
func (n *Net) Cut(a, b string) {
	n.update(func() { n.held[link{a, b}], n.held[link{b, a}] = true, true })
}

// CutOneWay holds the bytes from one host to another; the other way flows.
func (n *Net) CutOneWay(from, to string) { n.update(func() { n.held[link{from, to}] = true }) }

// Partition cuts every link between hosts on different sides; links
// within a side, and of hosts on no side, are left as they are.
func (n *Net) Partition(sides ...[]string) {
	n.update(func() {
		for i, side := range sides {
			for _, other := range sides[i+1:] {
				for _, a := range side {
					for _, b := range other {
						n.held[link{a, b}], n.held[link{b, a}] = true, true
					}
				}
			}
		}
	})
}

// Isolate cuts host from every other host.
func (n *Net) Isolate(host string) {
	others := slices.DeleteFunc(n.Hosts(), func(h string) bool { return h == host })
	n.Partition([]string{host}, others)
}

// Heal lifts every cut; delay, jitter and loss stay.
func (n *Net) Heal() { n.update(func() { clear(n.held) }) }

// Shape sets the delay, jitter and loss of every link, undoing
// ShapeBetween (f.Hold is ignored: cuts are Cut's).
func (n *Net) Shape(f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	f.Hold = false
	n.update(func() { n.shape = f; clear(n.pairs) })
	return nil
}

// ShapeBetween sets the delay, jitter and loss of the link between a and
// b, both ways, leaving every other link as Shape set it.
func (n *Net) ShapeBetween(a, b string, f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	f.Hold = false
	n.update(func() { n.pairs[link{a, b}], n.pairs[link{b, a}] = f, f })
	return nil
}

// Window is when a cut held: from just after it was made to just after
// it healed.
type Window struct{ From, To time.Time }

// Flap cuts and heals on a schedule until ctx ends: cut makes the cut
// (say, func() { n.Isolate("n1") }), it holds for down, then every cut is
// healed for up. It returns, healed, with the windows it cut.
func (n *Net) Flap(ctx context.Context, down, up time.Duration, cut func()) []Window {
	var ws []Window
	for {
		cut()
		w := Window{From: time.Now()}
		ok := sleepCtx(ctx, down)
		n.Heal()
		w.To = time.Now()
		ws = append(ws, w)
		if !ok || !sleepCtx(ctx, up) {
			return ws
		}
	}
}

// String lists the cuts and the shape, for a test's log.
func (n *Net) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var cuts []string
	for l, h := range n.held {
		if h {
			cuts = append(cuts, l.from+"->"+l.to)
		}
	}
	slices.Sort(cuts)
	if len(cuts) == 0 {
		cuts = []string{"none"}
	}
	s := fmt.Sprintf("cut: %s; every link: %v", strings.Join(cuts, " "), n.shape)
	var pairs []string
	for l, f := range n.pairs {
		if l.from < l.to {
			pairs = append(pairs, fmt.Sprintf("%s<->%s: %v", l.from, l.to, f))
		}
	}
	slices.Sort(pairs)
	if len(pairs) > 0 {
		s += "; but " + strings.Join(pairs, ", ")
	}
	return s
}

// update changes the state under the lock and gives every proxy its
// faults.
func (n *Net) update(change func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	change()
	for l, ps := range n.links {
		up, down := n.faults(l.from, l.to), n.faults(l.to, l.from)
		for _, p := range ps {
			p.Set(up, down)
		}
	}
}

// faults are those of the bytes going from one host to another.
func (n *Net) faults(from, to string) Faults {
	f, ok := n.pairs[link{from, to}]
	if !ok {
		f = n.shape
	}
	f.Hold = n.held[link{from, to}]
	return f
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
