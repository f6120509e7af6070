package main

import (
	"bufio"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// nodeMallocs is the heap allocations the Go servers at endpoints have
// made so far, added up: the go_memstats_mallocs_total counter of their
// /metrics (leasehold's and etcd's both have it). -1 if one cannot be read.
func nodeMallocs(endpoints []string) int64 {
	var total int64
	for _, ep := range endpoints {
		n := mallocsOf(ep + "/metrics")
		if n < 0 {
			return -1
		}
		total += n
	}
	return total
}

var metricsClient = &http.Client{Timeout: 5 * time.Second}

func mallocsOf(url string) int64 {
	resp, err := metricsClient.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_mallocs_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return int64(f)
		}
	}
	return -1
}

// selfMallocs is this process's heap allocations so far: the clients'.
func selfMallocs() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.Mallocs)
}
