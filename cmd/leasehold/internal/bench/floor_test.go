package bench

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"
)

// The floors: what one request and one reply per operation cost on this
// machine before leasehold does any work. Each client has its own
// connection, as separate processes would. Compare with
// BenchmarkAcquireRelease* (two requests per pair) and the cluster
// package's BenchmarkRaftFloor.

const floorMsg = 64

// BenchmarkFloorTCP: bare loopback TCP, 64 bytes each way.
func BenchmarkFloorTCP(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, floorMsg)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	floorClients(b, func() (func() error, func()) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, floorMsg)
		return func() error {
			if _, err := c.Write(buf); err != nil {
				return err
			}
			_, err := io.ReadFull(c, buf)
			return err
		}, func() { c.Close() }
	})
}

// BenchmarkFloorHTTP: net/http over loopback (HTTP/1.1 with keep-alive, as
// the Go client talks to a node), 64-byte bodies each way.
func BenchmarkFloorHTTP(b *testing.B) {
	reply := make([]byte, floorMsg)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write(reply)
	}))
	defer srv.Close()
	floorClients(b, func() (func() error, func()) {
		tr := &http.Transport{MaxIdleConnsPerHost: 1}
		hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		body := make([]byte, floorMsg)
		return func() error {
			resp, err := hc.Post(srv.URL, "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return err
		}, tr.CloseIdleConnections
	})
}

// floorClients runs 1, 16 and 64 clients, each made by dial (its own
// connection), each sending one request at a time.
func floorClients(b *testing.B, dial func() (roundTrip func() error, done func())) {
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((clients + procs - 1) / procs)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				roundTrip, done := dial()
				defer done()
				for pb.Next() {
					if err := roundTrip(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "round-trips/s")
		})
	}
}
