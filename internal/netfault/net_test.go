package netfault

import (
	"context"
	"net"
	"testing"
	"time"
)

// net3 is three hosts with a proxy on every directed link (to a target
// nobody dials: only the faults are looked at).
func net3(t *testing.T) (*Net, map[[2]string]*Proxy) {
	t.Helper()
	n := NewNet()
	ps := map[[2]string]*Proxy{}
	hosts := []string{"a", "b", "c"}
	for _, from := range hosts {
		for _, to := range hosts {
			if from == to {
				continue
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			p := NewProxy(ln, "127.0.0.1:1", nil, 1)
			t.Cleanup(func() { p.Close() })
			n.Add(from, to, p)
			ps[[2]string{from, to}] = p
		}
	}
	return n, ps
}

// held says which directions of the proxy from→to hold.
func held(p *Proxy) [2]bool {
	up, down := p.Faults()
	return [2]bool{up.Hold, down.Hold}
}

func TestOneWayCutHoldsTheBytesOfEveryConnectionBetweenThePair(t *testing.T) {
	n, ps := net3(t)
	n.CutOneWay("a", "b")
	// Bytes from a to b: the up of a's connections to b, the down of b's to a.
	want := map[[2]string][2]bool{{"a", "b"}: {true, false}, {"b", "a"}: {false, true}}
	for l, p := range ps {
		if got := held(p); got != want[l] {
			t.Errorf("proxy %s->%s holds (up, down) %v, want %v", l[0], l[1], got, want[l])
		}
	}
	if s := n.String(); s != "cut: a->b; every link: clear" {
		t.Errorf("String() = %q", s)
	}
}

func TestIsolateAndHeal(t *testing.T) {
	n, ps := net3(t)
	if err := n.Shape(Faults{Delay: 10 * time.Millisecond, Loss: 0.1}); err != nil {
		t.Fatal(err)
	}
	n.Isolate("a")
	for l, p := range ps {
		want := l[0] == "a" || l[1] == "a"
		if got := held(p); got != [2]bool{want, want} {
			t.Errorf("proxy %s->%s holds %v after isolating a", l[0], l[1], got)
		}
		if up, _ := p.Faults(); up.Delay != 10*time.Millisecond || up.Loss != 0.1 {
			t.Errorf("proxy %s->%s lost its shape: %v", l[0], l[1], up)
		}
	}
	n.Heal()
	for l, p := range ps {
		if got := held(p); got != [2]bool{} {
			t.Errorf("proxy %s->%s holds %v after the heal", l[0], l[1], got)
		}
		if up, _ := p.Faults(); up.Delay != 10*time.Millisecond {
			t.Errorf("heal took the shape off %s->%s", l[0], l[1])
		}
	}
}

func TestShapeBetweenOverridesOneLink(t *testing.T) {
	n, ps := net3(t)
	slow := Faults{Delay: 50 * time.Millisecond}
	if err := n.ShapeBetween("a", "b", slow); err != nil {
		t.Fatal(err)
	}
	for l, p := range ps {
		up, down := p.Faults()
		want := Faults{}
		if (l[0] == "a" && l[1] == "b") || (l[0] == "b" && l[1] == "a") {
			want = slow
		}
		if up != want || down != want {
			t.Errorf("proxy %s->%s: %v / %v, want %v", l[0], l[1], up, down, want)
		}
	}
	if s := n.String(); s != "cut: none; every link: clear; but a<->b: delay 50ms±0s" {
		t.Errorf("String() = %q", s)
	}
	n.Shape(Faults{})
	if up, _ := ps[[2]string{"a", "b"}].Faults(); up != (Faults{}) {
		t.Errorf("Shape left a->b at %v", up)
	}
}

func TestFlapCutsAndHeals(t *testing.T) {
	n, ps := net3(t)
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	var sawCut bool
	ws := n.Flap(ctx, 20*time.Millisecond, 20*time.Millisecond, func() {
		n.Cut("a", "b")
		sawCut = sawCut || held(ps[[2]string{"a", "b"}]) == [2]bool{true, true}
	})
	if len(ws) < 3 || !sawCut {
		t.Fatalf("%d cuts in 250ms of 20ms/20ms flapping (saw the cut: %v)", len(ws), sawCut)
	}
	for i, w := range ws[:len(ws)-1] { // the last is cut short by ctx
		if d := w.To.Sub(w.From); d < 20*time.Millisecond || (i > 0 && w.From.Sub(ws[i-1].To) < 20*time.Millisecond) {
			t.Errorf("window %d: cut for %v, %v after the last heal", i, d, w.From.Sub(ws[max(i-1, 0)].To))
		}
	}
	if got := held(ps[[2]string{"a", "b"}]); got != [2]bool{} {
		t.Fatalf("Flap returned with a->b holding %v", got)
	}
}
