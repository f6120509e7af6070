//go:build ignore

// bodymem measures what large request bodies cost a leasehold node: it
// starts `BIN serve` on loopback, sends N concurrent JSON Batch bodies of
// SIZE bytes, and prints the node's resident memory before and at its peak
// (VmHWM), with the replies' status codes. Linux only (/proc).
//
//	go build -o /tmp/leasehold ./cmd/leasehold
//	go run scripts/bodymem.go -bin /tmp/leasehold -n 16 -size 16777216
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

func main() {
	bin := flag.String("bin", "leasehold", "the leasehold binary")
	n := flag.Int("n", 16, "concurrent requests")
	size := flag.Int("size", 16<<20, "bytes in each body")
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
	body := batchBody(*size)
	before := status(cmd.Process.Pid, "VmRSS")

	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	start := time.Now()
	for range *n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := http.Post(url+"/leasehold.v1.Leases/Batch", "application/json", bytes.NewReader(body))
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
	fmt.Printf("%d concurrent %d-byte JSON batches: RSS before %s, peak (VmHWM) %s; answered in %v: %v\n",
		*n, len(body), before, status(cmd.Process.Pid, "VmHWM"), took.Round(time.Millisecond), codes)
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
