//go:build ignore

// leasemem measures a node's resident memory per held lease: it starts
// `BIN serve` on loopback (fsync'd log in a temp dir), reads its RSS
// empty, then runs `BIN bench --workload renew` holding N leases renewed
// at TTL/3 for D, reads the node's RSS again while they are held, and
// prints the RSS per lease above the empty node. It fails if a lease was
// lost. Linux only (/proc).
//
//	go build -o /tmp/leasehold ./cmd/leasehold
//	go run scripts/leasemem.go -bin /tmp/leasehold -leases 100000 -duration 2m
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
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
	leases := flag.Int("leases", 100_000, "leases held")
	duration := flag.Duration("duration", 2*time.Minute, "how long they are renewed")
	clients := flag.Int("clients", 64, "renewal workers")
	flag.Parse()

	dir, err := os.MkdirTemp("", "leasemem")
	check(err)
	defer os.RemoveAll(dir)
	api, raft := freeAddr(), freeAddr()
	node := exec.Command(*bin, "serve", "--data-dir", dir+"/data", "--api-addr", api, "--raft-addr", raft, "--log-level", "warn")
	node.Stderr = os.Stderr
	check(node.Start())
	defer node.Process.Kill()
	url := "http://" + api
	waitReady(url)
	time.Sleep(2 * time.Second) // let the empty node settle
	empty := rss(node.Process.Pid)

	// Sample the node's RSS while the leases are held; the largest sample
	// after the warm-up is what the leases cost at worst.
	stop := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var max int64
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				peak <- max
				return
			case <-t.C:
				if r := rss(node.Process.Pid); r > max {
					max = r
				}
			}
		}
	}()
	var out bytes.Buffer
	b := exec.Command(*bin, "bench", "--endpoints", url, "--workload", "renew", "--leases", strconv.Itoa(*leases),
		"--clients", strconv.Itoa(*clients), "--duration", duration.String(), "-o", "json")
	b.Stdout, b.Stderr = &out, os.Stderr
	check(b.Run())
	held := rss(node.Process.Pid)
	close(stop)
	max := <-peak

	var rep struct {
		Throughput struct {
			PerSecond float64 `json:"per_second"`
		} `json:"throughput"`
		Renew struct {
			Granted   int64 `json:"granted"`
			Lost      int64 `json:"lost"`
			HeldAtEnd int64 `json:"held_at_end"`
		} `json:"renew"`
	}
	check(json.Unmarshal(out.Bytes(), &rep))
	n := float64(rep.Renew.Granted)
	fmt.Printf("leases %d held, %d lost, %d held at the end; %.0f renewals/s\n", rep.Renew.Granted, rep.Renew.Lost, rep.Renew.HeldAtEnd, rep.Throughput.PerSecond)
	fmt.Printf("node RSS empty %.1f MiB, at the end %.1f MiB, peak %.1f MiB\n", mib(empty), mib(held), mib(max))
	fmt.Printf("RSS per lease above the empty node: %.2f KiB at the end, %.2f KiB at the peak\n",
		float64(held-empty)/n/1024, float64(max-empty)/n/1024)
	if rep.Renew.Lost > 0 || rep.Renew.Granted < int64(*leases) {
		fmt.Fprintln(os.Stderr, "leasemem: leases were lost or not granted")
		os.Exit(1)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// rss is pid's resident set size in bytes (VmRSS).
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			check(err)
			return kb << 10
		}
	}
	panic("no VmRSS")
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().String()
}

func waitReady(url string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get(url + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	check(fmt.Errorf("node at %s not ready in 30s", url))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "leasemem:", err)
		os.Exit(1)
	}
}
