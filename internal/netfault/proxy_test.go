package netfault

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server accepts connections on loopback and hands each to handle.
func server(t *testing.T, handle func(net.Conn)) (addr string, accepted chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			go func() { defer c.Close(); handle(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), accepted
}

// echo writes back every line it reads.
func echo(c net.Conn) { io.Copy(c, c) }

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(ln, target, nil, 1)
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readLine reads one line within d, or says why not.
func readLine(c net.Conn, r *bufio.Reader, d time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	s, err := r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

func TestProxyForwardsBothWaysAndHalfCloses(t *testing.T) {
	target, _ := server(t, func(c net.Conn) {
		b, _ := io.ReadAll(c) // until the opener's half-close
		fmt.Fprintf(c, "got %d bytes\n", len(b))
	})
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	payload := strings.Repeat("x", 100<<10) // several reads' worth
	if _, err := io.WriteString(c, payload); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("got %d bytes\n", len(payload)); string(b) != want {
		t.Fatalf("reply %q, want %q", b, want)
	}
}

// A held direction delivers nothing until healed, then everything in
// order; the other direction flows meanwhile.
func TestHoldOneDirection(t *testing.T) {
	fromTarget := make(chan string, 10)
	toTarget := make(chan net.Conn, 1)
	target, _ := server(t, func(c net.Conn) {
		toTarget <- c
		r := bufio.NewReader(c)
		for {
			s, err := r.ReadString('\n')
			if err != nil {
				return
			}
			fromTarget <- s
		}
	})
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	r := bufio.NewReader(c)
	fmt.Fprintln(c, "before")
	if got := <-fromTarget; got != "before\n" {
		t.Fatalf("target read %q", got)
	}
	s := <-toTarget

	p.Set(Faults{Hold: true}, Faults{})
	fmt.Fprintln(c, "held 1")
	fmt.Fprintln(c, "held 2")
	fmt.Fprintln(s, "down flows")
	if got, err := readLine(c, r, 2*time.Second); err != nil || got != "down flows" {
		t.Fatalf("the opener read %q, %v while only up is held", got, err)
	}
	select {
	case got := <-fromTarget:
		t.Fatalf("the target read %q while up is held", got)
	case <-time.After(300 * time.Millisecond): // a hold must deliver nothing: wait a while
	}

	p.Set(Faults{}, Faults{})
	var got []string
	for range 2 {
		select {
		case l := <-fromTarget:
			got = append(got, l)
		case <-time.After(2 * time.Second):
			t.Fatalf("after the heal the target read only %q", got)
		}
	}
	if strings.Join(got, "") != "held 1\nheld 2\n" {
		t.Fatalf("after the heal the target read %q, want the held lines in order", got)
	}
}

// A connection opened while its opener's direction is held reaches the
// target only when it flows.
func TestConnectionOpenedAcrossACutWaitsForTheHeal(t *testing.T) {
	target, accepted := server(t, echo)
	p := newProxy(t, target)
	p.Set(Faults{Hold: true}, Faults{Hold: true})
	c := dial(t, p.Addr())
	fmt.Fprintln(c, "hello")
	select {
	case <-accepted:
		t.Fatal("the target accepted a connection opened across a cut")
	case <-time.After(300 * time.Millisecond):
	}
	p.Set(Faults{}, Faults{})
	if got, err := readLine(c, bufio.NewReader(c), 2*time.Second); err != nil || got != "hello" {
		t.Fatalf("after the heal: %q, %v", got, err)
	}
}

// Every line arrives after at least Delay-Jitter, and in order.
func TestDelayKeepsOrder(t *testing.T) {
	target, _ := server(t, echo)
	p := newProxy(t, target)
	const delay, jitter = 40 * time.Millisecond, 30 * time.Millisecond
	p.Set(Faults{Delay: delay, Jitter: jitter}, Faults{})
	c := dial(t, p.Addr())
	r := bufio.NewReader(c)
	const lines = 50
	sent := make(chan time.Time, lines)
	go func() {
		for i := range lines {
			sent <- time.Now()
			fmt.Fprintln(c, i)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	for i := range lines {
		got, err := readLine(c, r, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got != strconv.Itoa(i) {
			t.Fatalf("line %d is %q: order lost", i, got)
		}
		if lag := time.Since(<-sent); lag < delay-jitter {
			t.Fatalf("line %d arrived after %v, before the least delay %v", i, lag, delay-jitter)
		}
	}
}

// lag draws delays within Delay±Jitter and stalls about Loss of the
// chunks by whole retransmission timeouts.
func TestLagDistribution(t *testing.T) {
	f := Faults{Delay: 200 * time.Millisecond, Jitter: 100 * time.Millisecond, Loss: 0.05}
	rnd := rand.New(rand.NewPCG(1, 2))
	const n = 20000
	stalled := 0
	for range n {
		d := f.lag(rnd)
		base := d
		if d > f.Delay+f.Jitter {
			stalled++
			for _, s := range []time.Duration{RTO, 3 * RTO, 7 * RTO, 15 * RTO, 31 * RTO} {
				if d-s >= f.Delay-f.Jitter && d-s <= f.Delay+f.Jitter {
					base = d - s
					break
				}
			}
		}
		if base < f.Delay-f.Jitter || base > f.Delay+f.Jitter {
			t.Fatalf("lag %v is no delay in %v±%v plus whole retransmission timeouts", d, f.Delay, f.Jitter)
		}
	}
	// The jitter (±100ms) is less than one RTO (200ms), so every stall shows.
	if got := float64(stalled) / n; got < 0.04 || got > 0.06 {
		t.Fatalf("%.3f of chunks stalled, want about %v", got, f.Loss)
	}
}

func TestFaultsValidate(t *testing.T) {
	for _, f := range []Faults{{Delay: -1}, {Delay: time.Millisecond, Jitter: time.Second}, {Loss: 1}, {Loss: -0.1}} {
		if f.Validate() == nil {
			t.Errorf("%+v: no error", f)
		}
	}
	if err := (Faults{Delay: time.Second, Jitter: time.Second, Loss: 0.5}).Validate(); err != nil {
		t.Error(err)
	}
}

// Close resets open connections, even held ones, and leaves no goroutine
// behind (goleak checks).
func TestCloseResetsConnections(t *testing.T) {
	target, _ := server(t, echo)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	fmt.Fprintln(c, "x")
	r := bufio.NewReader(c)
	if _, err := readLine(c, r, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(Faults{Hold: true}, Faults{Hold: true})
	fmt.Fprintln(c, "held")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := readLine(c, r, 2*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("read after Close: %v, want the connection reset", err)
	}
}

// A target that is not there resets the opener's connection.
func TestDeadTargetResets(t *testing.T) {
	p := newProxy(t, "127.0.0.1:1") // nothing listens on port 1
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		return // the reset came before the connect returned
	}
	defer c.Close()
	if _, err := readLine(c, bufio.NewReader(c), 2*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("read: %v, want the connection reset", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
