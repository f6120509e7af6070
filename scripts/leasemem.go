//go:build ignore

// leasemem measures a node's resident memory per held lease: it starts
// `BIN serve` on loopback (fsync'd log in a temp dir), reads its RSS
// empty, then runs `BIN bench --workload renew` holding N leases renewed
// at TTL/3 for D, samples the node's RSS every second, and prints the RSS
// per lease above the empty node: at the end (after the bench released
// its leases, which the node remembers for retries), the peak of every
// sample, and the last and largest samples while all N were held. It
// prints the node's CPU time too, and fails if a lease was lost. Linux
// only (/proc). Extra flags after -- go to serve.
//
//	go build -o /tmp/leasehold ./cmd/leasehold
//	go run scripts/leasemem.go -bin /tmp/leasehold -leases 100000 -duration 2m [-- --gc-percent 50]
package main

import (
	"bytes"
	"encoding/json"
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
	leases := flag.Int("leases", 100_000, "leases held")
	duration := flag.Duration("duration", 2*time.Minute, "how long they are renewed")
	clients := flag.Int("clients", 64, "renewal workers")
	flag.Parse()

	dir, err := os.MkdirTemp("", "leasemem")
	check(err)
	defer os.RemoveAll(dir)
	api, raft := freeAddr(), freeAddr()
	node := exec.Command(*bin, append([]string{"serve", "--data-dir", dir + "/data", "--api-addr", api, "--raft-addr", raft,
		"--log-level", "warn"}, flag.Args()...)...)
	node.Stderr = os.Stderr
	check(node.Start())
	defer node.Process.Kill()
	url := "http://" + api
	waitReady(url)
	time.Sleep(2 * time.Second) // let the empty node settle
	empty := rss(node.Process.Pid)
	cpu0 := cpuTime(node.Process.Pid)

	// Sample the node's RSS while the leases are held; the largest sample
	// is what the leases cost at worst.
	type samples struct{ max, heldLast, heldMax int64 }
	stop := make(chan struct{})
	peak := make(chan samples)
	go func() {
		var s samples
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				peak <- s
				return
			case <-t.C:
				r := rss(node.Process.Pid)
				s.max = max(s.max, r)
				if held(url) >= *leases {
					s.heldLast, s.heldMax = r, max(s.heldMax, r)
				}
			}
		}
	}()
	var out bytes.Buffer
	start := time.Now()
	b := exec.Command(*bin, "bench", "--endpoints", url, "--workload", "renew", "--leases", strconv.Itoa(*leases),
		"--clients", strconv.Itoa(*clients), "--duration", duration.String(), "-o", "json")
	b.Stdout, b.Stderr = &out, os.Stderr
	check(b.Run())
	end := rss(node.Process.Pid)
	cpu := cpuTime(node.Process.Pid) - cpu0
	close(stop)
	s := <-peak

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
	fmt.Printf("node RSS empty %.1f MiB, at the end %.1f MiB, peak %.1f MiB; all held: last %.1f MiB, peak %.1f MiB\n",
		mib(empty), mib(end), mib(s.max), mib(s.heldLast), mib(s.heldMax))
	perLease := func(b int64) float64 { return float64(b-empty) / n / 1024 }
	fmt.Printf("RSS per lease above the empty node: %.2f KiB at the end, %.2f KiB at the peak; all held: %.2f KiB last, %.2f KiB peak\n",
		perLease(end), perLease(s.max), perLease(s.heldLast), perLease(s.heldMax))
	fmt.Printf("node CPU %.1f s (%.0f%% of the run)\n", cpu.Seconds(), 100*cpu.Seconds()/time.Since(start).Seconds())
	if rep.Renew.Lost > 0 || rep.Renew.Granted < int64(*leases) {
		fmt.Fprintln(os.Stderr, "leasemem: leases were lost or not granted")
		node.Process.Kill() // os.Exit runs no deferred call
		os.RemoveAll(dir)
		os.Exit(1)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// held is the node's leasehold_leases_held gauge (0 if unread).
func held(url string) int {
	r, err := http.Get(url + "/metrics")
	if err != nil {
		return 0
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "leasehold_leases_held "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f)
		}
	}
	return 0
}

// cpuTime is pid's user and system CPU time so far.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	check(err)
	// The fields after the command name (in parentheses): utime and stime
	// are the 12th and 13th, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

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
