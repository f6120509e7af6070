package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
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

// emptyLeases answers Get with an empty message: nothing behind the
// handler, so a call costs only HTTP and Connect.
type emptyLeases struct {
	leaseholdv1connect.UnimplementedLeasesHandler
}

func (emptyLeases) Get(context.Context, *connect.Request[pb.GetRequest]) (*connect.Response[pb.GetResponse], error) {
	return connect.NewResponse(&pb.GetResponse{}), nil
}

// BenchmarkFloorConnect: a Connect call (binary protobuf over HTTP/1.1, as
// the Go client calls a node) to a handler that does nothing. The "h2c"
// cases speak HTTP/2 without TLS instead, as gRPC clients do.
func BenchmarkFloorConnect(b *testing.B) {
	for _, h2c := range []bool{false, true} {
		b.Run(map[bool]string{false: "http1", true: "h2c"}[h2c], func(b *testing.B) {
			var server, client http.Protocols
			server.SetHTTP1(true)
			server.SetUnencryptedHTTP2(true)
			client.SetHTTP1(!h2c)
			client.SetUnencryptedHTTP2(h2c)
			mux := http.NewServeMux()
			// As a node answers: small replies go uncompressed.
			mux.Handle(leaseholdv1connect.NewLeasesHandler(emptyLeases{}, connect.WithCompressMinBytes(8<<10)))
			srv := httptest.NewUnstartedServer(mux)
			srv.Config.Protocols = &server
			srv.Start()
			defer srv.Close()
			floorClients(b, func() (func() error, func()) {
				tr := &http.Transport{MaxIdleConnsPerHost: 1, Protocols: &client}
				c := leaseholdv1connect.NewLeasesClient(&http.Client{Transport: tr}, srv.URL)
				return func() error {
					_, err := c.Get(context.Background(), connect.NewRequest(&pb.GetRequest{Resource: "floor"}))
					return err
				}, tr.CloseIdleConnections
			})
		})
	}
}

// floorClients runs 1, 16 and 64 clients, each made by dial (its own
// connection), each sending one request at a time.
func floorClients(b *testing.B, dial func() (roundTrip func() error, done func())) {
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((clients + procs - 1) / procs)
			start, cpu := time.Now(), processCPU()
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
			// Both sides' CPU: client and server are in this process.
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
