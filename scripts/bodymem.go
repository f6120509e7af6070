//go:build ignore

// bodymem measures what large request bodies cost a leasehold node: it
// starts `BIN serve` on loopback, sends N concurrent JSON Batch bodies of
// SIZE bytes (tiny acquires; with -pad, one acquire and spaces; with
// -gzip, compressed: 8 KB of gzip inflate to 8 MiB of spaces) from ADDRS
// loopback addresses, and prints the node's resident memory before and at its peak (VmHWM),
// the most bytes of bodies it counted in flight
// (leasehold_inflight_body_bytes, sampled), the replies' status codes and
// its refusals by limit. Linux only (/proc).
//
//	go build -o /tmp/leasehold ./cmd/leasehold
//	go run scripts/bodymem.go -bin /tmp/leasehold -n 16 -size 16777216
//	go run scripts/bodymem.go -bin /tmp/leasehold -n 320 -size 8388608 -gzip -pad -addrs 320
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	bin := flag.String("bin", "leasehold", "the leasehold binary")
	n := flag.Int("n", 16, "concurrent requests")
	size := flag.Int("size", 16<<20, "bytes in each body (decoded)")
	gz := flag.Bool("gzip", false, "send the bodies compressed (Content-Encoding: gzip)")
	pad := flag.Bool("pad", false, "one acquire and spaces, instead of tiny acquires")
	addrs := flag.Int("addrs", 1, "loopback addresses to send from (127.1.0.1 on)")
	flag.Parse()

	dir, err := os.MkdirTemp("", "bodymem-")
	check(err)
	defer os.RemoveAll(dir)
	api, raft := freeAddr(), freeAddr()
	cmd := exec.Command(*bin, "serve", "--data-dir", dir, "--api-addr", api, "--raft-addr", raft, "--log-level", "error")
	cmd.Stderr = os.Stderr
	check(cmd.Start())
	defer cmd.Process.Kill()
	url := "http://" + api
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "node not ready")
			os.Exit(1)
		}
		time.Sleep(100 * time.Millisecond)
	}
	body, kind := batchBody(*size), "JSON"
	if *pad {
		body = append([]byte(`{"ops":[{"acquire":{"resources":["r"]}}]}`), bytes.Repeat([]byte(" "), *size-41)...)
		kind = "padded JSON"
	}
	if *gz {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(body)
		w.Close()
		kind = fmt.Sprintf("gzip %s (%d bytes of gzip each)", kind, b.Len())
		body = b.Bytes()
	}
	before := status(cmd.Process.Pid, "VmRSS")
	stop := make(chan struct{})
	peak := make(chan int64)
	go func() { // the most bytes of bodies the node counts in flight
		var most int64
		for {
			select {
			case <-stop:
				peak <- most
				return
			case <-time.After(5 * time.Millisecond):
				most = max(most, int64(metric(url, "leasehold_inflight_body_bytes")))
			}
		}
	}()

	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	start := time.Now()
	clients := make([]*http.Client, *addrs)
	for i := range clients {
		src := &net.TCPAddr{IP: net.IPv4(127, 1, byte(i/250), byte(i%250+1))}
		clients[i] = &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: src}).DialContext}}
	}
	for i := range *n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, url+"/leasehold.v1.Leases/Batch", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if *gz {
				req.Header.Set("Content-Encoding", "gzip")
			}
			res, err := clients[i%len(clients)].Do(req)
			code := "error"
			if err == nil {
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				code = res.Status
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(stop)
	fmt.Printf("%d concurrent %d-byte %s batches from %d addresses: RSS before %s, peak (VmHWM) %s; at most %d bytes of bodies in flight; answered in %v: %v\n",
		*n, *size, kind, *addrs, before, status(cmd.Process.Pid, "VmHWM"), <-peak, took.Round(time.Millisecond), codes)
	refused := []string{}
	for _, limit := range []string{"max_request_bytes", "max_inflight_body_bytes", "max_inflight_body_bytes_per_client", "body_timeout"} {
		refused = append(refused, fmt.Sprintf("%s %g", limit, metric(url, `leasehold_refused_total{limit="`+limit+`"}`)))
	}
	fmt.Printf("refused by limit: %s\n", strings.Join(refused, ", "))
}

// metric reads one series from the node's /metrics (0 if absent).
func metric(url, series string) float64 {
	res, err := http.Get(url + "/metrics")
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// batchBody is a JSON Batch of tiny acquires, size bytes long.
func batchBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"ops":[`)
	op := `{"acquire":{"resources":["r"]}}`
	for b.Len()+len(op)+3 < size {
		if b.Len() > len(`{"ops":[`) {
			b.WriteByte(',')
		}
		b.WriteString(op)
	}
	b.WriteString("]}")
	for b.Len() < size {
		b.WriteByte(' ')
	}
	return b.Bytes()
}

func status(pid int, field string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
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
