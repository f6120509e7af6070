package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/internal/testutil"
)

// plainLeases answers Get at once, and List only when the request's
// context ends (a call that never gets its answer).
type plainLeases struct {
	leaseholdv1connect.UnimplementedLeasesHandler
	listEnded chan struct{}
}

func (plainLeases) Get(_ context.Context, r *connect.Request[pb.GetRequest]) (*connect.Response[pb.GetResponse], error) {
	return connect.NewResponse(&pb.GetResponse{Resource: r.Msg.Resource}), nil
}

func (h plainLeases) List(ctx context.Context, _ *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	<-ctx.Done()
	close(h.listEnded)
	return nil, ctx.Err()
}

// plainServer is a Connect server on loopback that counts the connections
// it accepts and has closed.
type plainServer struct {
	*httptest.Server
	h              plainLeases
	opened, closed atomic.Int32
}

func startPlainServer(t *testing.T, idle time.Duration) *plainServer {
	s := &plainServer{h: plainLeases{listEnded: make(chan struct{})}}
	mux := http.NewServeMux()
	mux.Handle(leaseholdv1connect.NewLeasesHandler(s.h))
	s.Server = httptest.NewUnstartedServer(mux)
	s.Config.IdleTimeout = idle
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func unaryClient(t *testing.T, url string) (leaseholdv1connect.LeasesClient, *unaryTransport) {
	tr := defaultTransport(Config{}).(*unaryTransport)
	t.Cleanup(tr.CloseIdleConnections)
	return leaseholdv1connect.NewLeasesClient(&http.Client{Transport: tr}, url), tr
}

func getOK(t *testing.T, c leaseholdv1connect.LeasesClient, name string) {
	t.Helper()
	r, err := c.Get(testutil.Context(t, 10*time.Second), connect.NewRequest(&pb.GetRequest{Resource: name}))
	if err != nil {
		t.Fatalf("Get %s: %v", name, err)
	}
	if r.Msg.Resource != name {
		t.Fatalf("Get %s answered for %q", name, r.Msg.Resource)
	}
}

// TestUnaryCallsReuseOneConnection: a client's calls one after another go
// over one kept connection, as separate worker processes each keep theirs.
func TestUnaryCallsReuseOneConnection(t *testing.T) {
	s := startPlainServer(t, time.Minute)
	c, _ := unaryClient(t, s.URL)
	for i := range 100 {
		getOK(t, c, "r"+string(rune('a'+i%26)))
	}
	if n := s.opened.Load(); n != 1 {
		t.Errorf("100 calls one after another opened %d connections, want 1", n)
	}
}

// TestUnaryTransportRedialsAfterTheNodeClosedAnIdleConnection: a kept
// connection that the node closed while it was idle is not written to:
// the next call dials a new one and succeeds at its first attempt.
func TestUnaryTransportRedialsAfterTheNodeClosedAnIdleConnection(t *testing.T) {
	s := startPlainServer(t, 50*time.Millisecond)
	c, _ := unaryClient(t, s.URL)
	getOK(t, c, "a")
	testutil.Eventually(t, 5*time.Second, "the server closes the idle connection", func() bool { return s.closed.Load() == 1 })
	getOK(t, c, "b") // the attempt itself must not fail: call's retry is not in this path
	if n := s.opened.Load(); n != 2 {
		t.Errorf("%d connections opened, want 2 (the closed one replaced)", n)
	}
}

// TestUnaryTransportAbandonsACallWhoseContextEnds: a call whose context
// ends while it waits for its answer returns at once with the context's
// error, the node sees the connection close (so a waiting acquire is
// withdrawn), and the next call works on a new connection.
func TestUnaryTransportAbandonsACallWhoseContextEnds(t *testing.T) {
	s := startPlainServer(t, time.Minute)
	c, _ := unaryClient(t, s.URL)
	getOK(t, c, "a")
	// Canceled, not timed out: a deadline would travel with the request
	// and the server would answer at it, which is not what is tested.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var canceled time.Time
	time.AfterFunc(100*time.Millisecond, func() { canceled = time.Now(); cancel() })
	done := make(chan error, 1)
	go func() {
		_, err := c.List(ctx, connect.NewRequest(&pb.ListRequest{}))
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		s.CloseClientConnections() // lets the call and the server's handler end
		t.Fatal("List still waiting 10s after its context was canceled")
	}
	if connect.CodeOf(err) != connect.CodeCanceled || !errors.Is(err, context.Canceled) {
		t.Errorf("List under a canceled context: %v, want canceled", err)
	}
	if took := time.Since(canceled); took > 5*time.Second {
		t.Errorf("List returned %v after its context ended", took)
	}
	select {
	case <-s.h.listEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's handler never saw the call end")
	}
	getOK(t, c, "b")
	if n := s.opened.Load(); n != 2 {
		t.Errorf("%d connections opened, want 2 (the abandoned one not reused)", n)
	}
}

// TestUnaryTransportTakesOnlyUnaryCalls: streams, TLS and anything not a
// unary Connect call go to net/http's transport unchanged.
func TestUnaryTransportTakesOnlyUnaryCalls(t *testing.T) {
	tr := newUnaryTransport(&http.Transport{})
	for _, c := range []struct {
		name, url, method, contentType string
		length                         int64
		want                           bool
	}{
		{"unary proto", "http://n:1/leasehold.v1.Leases/Get", "POST", "application/proto", 10, true},
		{"unary json", "http://n:1/leasehold.v1.Leases/Get", "POST", "application/json", 10, true},
		{"server stream", "http://n:1/leasehold.v1.Watch/Watch", "POST", "application/connect+proto", 10, false},
		{"grpc", "http://n:1/leasehold.v1.Leases/Get", "POST", "application/grpc", 10, false},
		{"unknown length", "http://n:1/leasehold.v1.Leases/Get", "POST", "application/proto", -1, false},
		{"large body", "http://n:1/leasehold.v1.Queues/SendBatch", "POST", "application/proto", 1 << 20, false},
		{"tls", "https://n:1/leasehold.v1.Leases/Get", "POST", "application/proto", 10, false},
		{"get", "http://n:1/metrics", "GET", "", 0, false},
	} {
		req, err := http.NewRequest(c.method, c.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = c.length
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		if got := tr.takes(req); got != c.want {
			t.Errorf("%s: takes = %v, want %v", c.name, got, c.want)
		}
	}
}

// BenchmarkUnaryTransport: a unary call to a handler that does nothing,
// client and server in this process, through net/http's transport and
// through unaryTransport; 16 callers, each with its own transport (as
// separate processes would have). cpu-µs/op is both sides' CPU per call.
//
//	go test -run XXX -bench UnaryTransport ./client
func BenchmarkUnaryTransport(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle(leaseholdv1connect.NewLeasesHandler(plainLeases{}, connect.WithCompressMinBytes(8<<10)))
	s := httptest.NewServer(mux)
	defer s.Close()
	for _, c := range []struct {
		name string
		make func() idleCloser
	}{
		{"net-http", func() idleCloser { return &http.Transport{MaxIdleConnsPerHost: 256} }},
		{"unary", func() idleCloser { return defaultTransport(Config{}) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetParallelism(8) // 16 callers with GOMAXPROCS 2
			cpu := processCPU()
			b.RunParallel(func(pb_ *testing.PB) {
				tr := c.make()
				defer tr.CloseIdleConnections()
				lc := leaseholdv1connect.NewLeasesClient(&http.Client{Transport: tr}, s.URL)
				for pb_.Next() {
					if _, err := lc.Get(context.Background(), connect.NewRequest(&pb.GetRequest{Resource: "r"})); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestLargeRequestGetsTheNodesRefusal: a node refuses a body over its
// limit before reading it, as server's body guard does; the caller gets
// that answer (resource_exhausted), not a broken connection.
func TestLargeRequestGetsTheNodesRefusal(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(leaseholdv1connect.NewLeasesHandler(plainLeases{}))
	const limit = 256 << 10
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"code":"resource_exhausted","message":"a request body may hold 262144 bytes"}`))
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	c, _ := unaryClient(t, s.URL)
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = 'x'
	}
	_, err := c.Get(testutil.Context(t, 30*time.Second), connect.NewRequest(&pb.GetRequest{Resource: string(big)}))
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("an 8 MiB request to a node that refuses it: %v, want resource_exhausted", err)
	}
	getOK(t, c, "small") // and the client goes on
}

// TestUnaryTransportClosesStaleIdleConnections: giving a connection back
// closes those to the same node idle for longer than unaryIdleTimeout, so
// a pool that shrank to one busy connection does not keep the rest open.
func TestUnaryTransportClosesStaleIdleConnections(t *testing.T) {
	s := startPlainServer(t, time.Minute)
	c, tr := unaryClient(t, s.URL)
	host := s.Listener.Addr().String()
	var conns []*unaryConn
	for range 3 {
		uc, err := tr.get(t.Context(), host)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, uc)
	}
	for _, uc := range conns {
		tr.put(host, uc)
	}
	tr.mu.Lock()
	for _, uc := range tr.idle[host][:2] {
		uc.idleAt = uc.idleAt.Add(-2 * unaryIdleTimeout) // as if idle that long
	}
	tr.mu.Unlock()
	getOK(t, c, "r") // on the fresh one, given back after: the two others go
	testutil.Eventually(t, 5*time.Second, "the node sees the two stale connections close", func() bool {
		return s.closed.Load() == 2
	})
	if n := s.opened.Load(); n != 3 {
		t.Errorf("%d connections opened, want 3 (the call on the fresh one)", n)
	}
}
