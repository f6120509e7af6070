package faults

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowBodyBound is how long a request whose body trickles in may hold its
// connection before the node cuts it off.
const slowBodyBound = 45 * time.Second

// TestHostileInput sends a single node, under load, requests that would
// exhaust or confuse it: an oversized body, an oversized value, unknown
// JSON fields, a body trickling in a byte at a time, and a flood of idle
// and half-sent connections. Each must be refused with a clear error (an
// accepted one counts as unauthorized), and the load must go on.
func TestHostileInput(t *testing.T) {
	const scenario = "hostile-input"
	n := newNode(t, "n1", "")
	c := newClient(t, "", n.url)
	h := &history{}
	err := n.start()
	if err == nil {
		err = hostile(t, n, h)
	}
	finish(t, scenario, h, c, expect{}, err)
}

func hostile(t *testing.T, n *node, h *history) error {
	c := newClient(t, "", n.url)
	w := startWorkload(c, h, "input", 2)
	defer w.stop()
	if err := w.waitAcks(6, progressTimeout); err != nil {
		return fmt.Errorf("before the hostile requests: %w", err)
	}

	slow := make(chan error, 1)
	go func() { slow <- trickle(n.apiAddr, slowBodyBound) }()
	flood, err := openFlood(n.apiAddr, rounds(1000, 5000))
	defer closeAll(flood)
	if err != nil {
		t.Logf("the node refused part of the flood (a defence, not a failure): %v", err)
	}
	t.Logf("holding %d idle and half-sent connections", len(flood))

	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	post := func(path, body string) (int, string, error) {
		resp, err := hc.Post(n.url+path, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b), nil
	}
	var unclear []string // refused, but as a server failure rather than the caller's error
	for _, bad := range []struct {
		what, path, body string
		mayCut           bool // refused before the body is read: the client may see the cut before the answer
	}{
		{"a 24 MiB request body", "/leasehold.v1.KV/Put",
			`{"key":"input/huge","value":"` + strings.Repeat("QUFB", 6<<20) + `"}`, true},
		{"a 1 MiB value (the limit is 64 KiB)", "/leasehold.v1.KV/Put",
			`{"key":"input/big","value":"` + strings.Repeat("QUFB", 256<<10) + `"}`, false},
		{"an acquire with an unknown JSON field", "/leasehold.v1.Leases/Acquire",
			`{"resources":["input/unknown"],"ttl":"5s","ttlSeconds":5}`, false},
		{"a write with an unknown JSON field", "/leasehold.v1.KV/Put",
			`{"key":"input/unknown","value":"eA==","fenceToken":"1"}`, false},
		{"a body that is not JSON", "/leasehold.v1.KV/Put", `{"key":"input/nojson",`, false},
	} {
		code, body, err := post(bad.path, bad.body)
		switch {
		case err != nil && bad.mayCut:
			t.Logf("%s: the connection was cut: %v", bad.what, err)
		case err != nil:
			unclear = append(unclear, fmt.Sprintf("%s: the connection was cut: %v", bad.what, err))
		case code/100 == 2:
			h.accepted("%s was accepted (HTTP %d)", bad.what, code)
		case code/100 != 4:
			unclear = append(unclear, fmt.Sprintf("%s: HTTP %d %s", bad.what, code, firstLine(body)))
		default:
			t.Logf("%s: HTTP %d %s", bad.what, code, firstLine(body))
		}
	}
	if err := w.waitAcks(6, progressTimeout); err != nil {
		return fmt.Errorf("under the flood of connections: %w", err)
	}
	w.stop()
	if err := <-slow; err != nil {
		return err
	}
	if len(unclear) > 0 {
		return fmt.Errorf("refused without a caller's error (4xx): %s", strings.Join(unclear, "; "))
	}
	return nil
}

// trickle sends a request whose body comes a byte every 500ms and reports
// an error if the node still reads it after bound.
func trickle(addr string, bound time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	body := `{"key":"input/slow","value":"` + strings.Repeat("QUFB", 64) + `"}`
	fmt.Fprintf(conn, "POST /leasehold.v1.KV/Put HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, len(body))
	start := time.Now()
	for i := 0; i < len(body); i++ {
		if time.Since(start) > bound {
			return fmt.Errorf("a request body trickling in at 2 bytes a second was still being read after %v", bound)
		}
		conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte{body[i]}); err != nil {
			return nil // cut off
		}
		// A cut-off shows as a reply or a closed connection.
		conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		var b [1]byte
		if _, err := conn.Read(b[:]); err == nil || !isTimeout(err) {
			return nil
		}
	}
	return fmt.Errorf("a request body trickling in at 2 bytes a second was read to its end (%v) without being cut off", time.Since(start).Round(time.Second))
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// floodDialer connects from another loopback address than the load and
// the hostile requests, as an attacker on another host would: the node's
// per-address connection cap must keep the flood from starving the rest.
var floodDialer = net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}

// openFlood opens count connections: half idle, half with a request
// header sent in part.
func openFlood(addr string, count int) ([]net.Conn, error) {
	conns := make([]net.Conn, 0, count)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var first error
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < count; j += 16 {
				c, err := floodDialer.Dial("tcp", addr)
				mu.Lock()
				if err != nil {
					if first == nil {
						first = fmt.Errorf("connection %d of the flood: %w", j, err)
					}
					mu.Unlock()
					return
				}
				conns = append(conns, c)
				mu.Unlock()
				if j%2 == 1 {
					c.Write([]byte("POST /leasehold.v1.KV/Put HTTP/1.1\r\nHost: x\r\n"))
				}
			}
		}()
	}
	wg.Wait()
	return conns, first
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}
