//go:build ignore

// slowclients checks that slow clients from one address cannot take a
// leasehold node's file descriptors: it starts `BIN serve` on loopback with
// at most NOFILE open files, opens N connections from 127.0.0.1 that send
// one header byte every 5s, and then asks /healthz and Acquire from
// 127.0.0.2. Linux only (prlimit, 127.0.0.0/8 on lo).
//
//	go build -o /tmp/leasehold ./cmd/leasehold
//	go run scripts/slowclients.go -bin /tmp/leasehold -nofile 1024 -n 2000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

func main() {
	bin := flag.String("bin", "leasehold", "the leasehold binary")
	nofile := flag.Int("nofile", 1024, "the node's limit of open files")
	n := flag.Int("n", 2000, "slow connections from 127.0.0.1")
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
	var conns []net.Conn
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
	stop := make(chan struct{})
	go func() { // one more byte every 5s, on every connection
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				for _, c := range conns {
					io.WriteString(c, "O")
				}
			}
		}
	}()
	time.Sleep(time.Second) // let the node accept what it will
	open := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && strings.Contains(err.Error(), "timeout") {
			open++
		}
	}
	fmt.Printf("%d slow connections from 127.0.0.1 (%d dials failed), %d still open after 1s; node limited to %d files\n",
		*n, failed, open, *nofile)
	fmt.Printf("from 127.0.0.2: /healthz %s, /readyz %s, Acquire %s\n", get(other, url+"/healthz"), get(other, url+"/readyz"),
		post(other, url+"/leasehold.v1.Leases/Acquire", `{"resources":["slow/x"],"ttl":"10s"}`))
	close(stop)
	for _, c := range conns {
		c.Close()
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
