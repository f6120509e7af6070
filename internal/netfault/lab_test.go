package netfault

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// labs gives each lab test both kinds: the netns one where this machine
// can make it (root), else a failure under CI=true (CI runs as root) and
// a loud skip outside it.
func labs(t *testing.T, f func(t *testing.T, lab *Lab)) {
	t.Run("loopback", func(t *testing.T) {
		lab, err := NewLoopbackLab(3, []string{"echo"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer lab.Close()
		f(t, lab)
	})
	t.Run("netns", func(t *testing.T) {
		lab, err := NewNetnsLab(3, []string{"echo"}, 1)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI must be able to make network namespaces: %v", err)
			}
			t.Skipf("SKIPPED, not run: %v", err)
		}
		defer func() {
			if err := lab.Close(); err != nil {
				t.Error(err)
			}
		}()
		f(t, lab)
	})
}

// echoHosts runs an echo server on every host of lab.
func echoHosts(t *testing.T, lab *Lab) {
	t.Helper()
	for _, h := range lab.Hosts {
		ln, err := h.ListenTCP(h.Listen("echo"))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); io.Copy(c, c) }()
			}
		}()
		t.Cleanup(func() { ln.Close(); <-done })
	}
}

// roundTrip sends a line from one host to another's echo server and says
// whether it came back within d.
func roundTrip(t *testing.T, from, to *Host, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c, err := from.DialContext(ctx, "tcp", from.Reach(to, "echo"))
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d))
	fmt.Fprintln(c, "ping")
	_, err = bufio.NewReader(c).ReadString('\n')
	return err
}

func TestLabLinksPassThroughTheirProxies(t *testing.T) {
	labs(t, func(t *testing.T, lab *Lab) {
		t.Log(lab)
		echoHosts(t, lab)
		n1, n2, n3 := lab.Hosts[0], lab.Hosts[1], lab.Hosts[2]
		for _, pair := range [][2]*Host{{n1, n2}, {n2, n1}, {n1, n3}, {n3, n2}, {n1, n1}} {
			if err := roundTrip(t, pair[0], pair[1], 5*time.Second); err != nil {
				t.Fatalf("%s -> %s before any cut: %v", pair[0].Name, pair[1].Name, err)
			}
		}
		lab.Net.Isolate("n2")
		for _, pair := range [][2]*Host{{n1, n2}, {n2, n1}, {n3, n2}} {
			if err := roundTrip(t, pair[0], pair[1], 300*time.Millisecond); err == nil {
				t.Fatalf("%s -> %s answered while n2 is isolated", pair[0].Name, pair[1].Name)
			}
		}
		if err := roundTrip(t, n1, n3, 5*time.Second); err != nil {
			t.Fatalf("n1 -> n3 while only n2 is isolated: %v", err)
		}
		lab.Net.Heal()
		if err := roundTrip(t, n3, n2, 5*time.Second); err != nil {
			t.Fatalf("n3 -> n2 after the heal: %v", err)
		}
	})
}

// In a netns lab a host has no way to another host but its proxies.
func TestNetnsHostsHaveNoOtherRoute(t *testing.T) {
	lab, err := NewNetnsLab(2, []string{"echo"}, 1)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must be able to make network namespaces: %v", err)
		}
		t.Skipf("SKIPPED, not run: %v", err)
	}
	defer lab.Close()
	echoHosts(t, lab)
	n1, n2 := lab.Hosts[0], lab.Hosts[1]
	lab.Net.Cut("n1", "n2")
	// The root end of n2's veth, and n2's address dialed from n1: neither
	// gets through while the link is cut.
	for _, addr := range []string{rootEnd(n2), n1.Reach(n2, "echo")} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		c, err := n1.DialContext(ctx, "tcp", addr)
		cancel()
		if err == nil {
			c.SetDeadline(time.Now().Add(300 * time.Millisecond))
			fmt.Fprintln(c, "ping")
			_, err = bufio.NewReader(c).ReadString('\n')
			c.Close()
		}
		if err == nil {
			t.Errorf("n1 reached %s past the cut", addr)
		}
	}
}

// rootEnd is the root namespace's address on h's veth, port echo's.
func rootEnd(h *Host) string {
	host, port, _ := net.SplitHostPort(h.Listen("echo"))
	ip := net.ParseIP(host).To4()
	return net.JoinHostPort(fmt.Sprintf("10.78.%d.%d", ip[2], ip[3]), port)
}
