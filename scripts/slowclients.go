//go:build ignore

// slowclients checks that slow clients from one address cannot lock
// others out of a leasehold node: it starts `BIN serve` on loopback with
// at most NOFILE open files, opens N connections from 127.0.0.1 that send
// one header byte every 5s, and BODIES requests from 127.0.0.1 that
// declare a Content-Length of 8 MiB, send SENT bytes of it at once and
// then one byte a second; it
// then asks /healthz and Acquire from 127.0.0.2, and times ACQUIRES
// acquire-and-release pairs from there (p50, p99, and their answers).
// Linux only (prlimit, 127.0.0.0/8 on lo).
//
//	go build -o /tmp/leasehold ./cmd/leasehold
//	go run scripts/slowclients.go -bin /tmp/leasehold -nofile 1024 -n 2000
//	go run scripts/slowclients.go -bin /tmp/leasehold -n 0 -bodies 64 -acquires 500 [-sent 7340032]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	bin := flag.String("bin", "leasehold", "the leasehold binary")
	nofile := flag.Int("nofile", 1024, "the node's limit of open files")
	n := flag.Int("n", 2000, "slow connections from 127.0.0.1")
	bodies := flag.Int("bodies", 0, "slow request bodies from 127.0.0.1")
	acquires := flag.Int("acquires", 100, "timed acquires from 127.0.0.2")
	sent := flag.Int("sent", 1, "bytes of each slow body sent at once")
	flag.Parse()

	dir, err := os.MkdirTemp("", "slowclients-")
	check(err)
	defer os.RemoveAll(dir)
	api, raft := freeAddr(), freeAddr()
	lim := strconv.Itoa(*nofile)
	cmd := exec.Command("prlimit", "--nofile="+lim+":"+lim, *bin, "serve", "--data-dir", dir,
		"--api-addr", api, "--raft-addr", raft, "--log-level", "error")
	check(cmd.Start())
	defer cmd.Process.Kill()
	url := "http://" + api
	other := clientFrom("127.0.0.2")
	deadline := time.Now().Add(30 * time.Second)
	for get(other, url+"/readyz") != "200 OK" {
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "node not ready")
			os.Exit(1)
		}
		time.Sleep(100 * time.Millisecond)
	}

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}, Timeout: 5 * time.Second}
	var conns, slowBodies []net.Conn
	failed := 0
	for range *n {
		c, err := d.Dial("tcp", api)
		if err != nil {
			failed++
			continue
		}
		conns = append(conns, c)
		io.WriteString(c, "P")
	}
	for range *bodies {
		c, err := d.Dial("tcp", api)
		if err != nil {
			failed++
			continue
		}
		fmt.Fprintf(c, "POST /leasehold.v1.Leases/Batch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{%s",
			8<<20, strings.Repeat(" ", *sent-1))
		slowBodies = append(slowBodies, c)
	}
	stop := make(chan struct{})
	go every(stop, 5*time.Second, conns, "O")
	go every(stop, time.Second, slowBodies, " ")
	time.Sleep(time.Second) // let the node accept what it will
	open := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && strings.Contains(err.Error(), "timeout") {
			open++
		}
	}
	fmt.Printf("%d slow connections and %d slow bodies of 8 MiB (%d bytes sent at once) from 127.0.0.1 (%d dials failed), %d connections still open after 1s; node limited to %d files\n",
		*n, *bodies, *sent, failed, open, *nofile)
	fmt.Printf("from 127.0.0.2: /healthz %s, /readyz %s, Acquire %s\n", get(other, url+"/healthz"), get(other, url+"/readyz"),
		post(other, url+"/leasehold.v1.Leases/Acquire", `{"resources":["slow/x"],"ttl":"10s"}`))
	timeAcquires(other, url, *acquires)
	close(stop)
	for _, c := range append(conns, slowBodies...) {
		c.Close()
	}
}

// timeAcquires acquires and releases a resource n times from c, one after
// another, and prints the latency of the acquires and their answers.
func timeAcquires(c *http.Client, url string, n int) {
	var took []time.Duration
	answers := map[string]int{}
	for i := range n {
		start := time.Now()
		res, err := c.Post(url+"/leasehold.v1.Leases/Acquire", "application/json",
			strings.NewReader(fmt.Sprintf(`{"resources":["slow/%d"],"ttl":"10s"}`, i)))
		took = append(took, time.Since(start))
		if err != nil {
			answers["failed"]++
			continue
		}
		var lease struct {
			Lease  struct{ ID string }
			Secret string
		}
		json.NewDecoder(res.Body).Decode(&lease)
		res.Body.Close()
		answers[res.Status]++
		if res.StatusCode == http.StatusOK {
			post(c, url+"/leasehold.v1.Leases/Release", fmt.Sprintf(`{"leaseId":%q,"secret":%q}`, lease.Lease.ID, lease.Secret))
		}
	}
	if n == 0 {
		return
	}
	slices.Sort(took)
	pct := func(p float64) time.Duration {
		return took[min(len(took)-1, int(p*float64(len(took))))].Round(10 * time.Microsecond)
	}
	fmt.Printf("%d acquires from 127.0.0.2: p50 %v, p99 %v, max %v; answers %v\n", n, pct(0.5), pct(0.99), took[len(took)-1], answers)
}

// every writes s on each of conns every period, until stop is closed.
func every(stop <-chan struct{}, period time.Duration, conns []net.Conn, s string) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			for _, c := range conns {
				io.WriteString(c, s)
			}
		}
	}
}

func clientFrom(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 3 * time.Second}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

func get(c *http.Client, url string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	return do(c, req)
}

func post(c *http.Client, url, body string) string {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return do(c, req)
}

func do(c *http.Client, req *http.Request) string {
	res, err := c.Do(req)
	if err != nil {
		return "failed (" + err.Error() + ")"
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.Status
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().String()
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
