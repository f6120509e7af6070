package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// rawConn dials the node's API from the loopback address src (127.0.0.0/8:
// every one of them is this machine), so tests can play several clients.
func rawConn(t *testing.T, n *testcluster.Node, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(n.URL, "http://"))
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// clientFrom is an HTTP client whose connections come from src.
func clientFrom(t *testing.T, src string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// postHead writes the head of a JSON POST that announces length body bytes.
func postHead(t *testing.T, c net.Conn, procedure string, length int) {
	t.Helper()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", procedure, length)
}

// readReply reads one HTTP reply from c within d.
func readReply(t *testing.T, c net.Conn, d time.Duration) (int, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no reply within %v: %v", d, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// padded is a JSON body of exactly size bytes: obj and trailing spaces.
func padded(obj string, size int) string { return obj + strings.Repeat(" ", size-len(obj)) }

// A body that says it is over the limit is refused before a byte of it
// arrives.
func TestBodyTooLargeRefusedBeforeRead(t *testing.T) {
	t.Parallel()
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.MaxRequestBytes = 64 << 10 })
	c := rawConn(t, n, "127.0.0.1")
	postHead(t, c, "/leasehold.v1.Leases/Batch", 16<<20)
	status, body := readReply(t, c, 10*time.Second)
	if status != http.StatusTooManyRequests || !strings.Contains(body, "resource_exhausted") ||
		!strings.Contains(body, "may hold 65536 bytes once decoded (limit max_request_bytes); this one is 16777216 bytes") {
		t.Fatalf("16 MiB announced: status %d %s, want 429 resource_exhausted naming max_request_bytes", status, body)
	}
	// A body of unknown length (chunked, as gRPC sends) ends at the limit.
	hc := httpClient(t)
	req, _ := http.NewRequest(http.MethodPost, n.URL+"/leasehold.v1.Leases/Get",
		io.MultiReader(strings.NewReader(`{"resource":"x"`), strings.NewReader(strings.Repeat(" ", 1<<20)), strings.NewReader("}")))
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "resource_exhausted") {
		t.Fatalf("1 MiB chunked: status %d %s, want 429 resource_exhausted", res.StatusCode, b)
	}
	// Under the limit is served.
	if status, body := postJSON(t, hc, n, "/leasehold.v1.Leases/Get", padded(`{"resource":"x"}`, 60<<10)); status != http.StatusOK {
		t.Fatalf("60 KiB body: status %d %v", status, body)
	}
}

// The bodies of all requests in flight share one budget, charged as their
// bytes arrive; a request that would go over it is refused at once, not
// queued.
func TestBodyBudgetRefusesAtOnce(t *testing.T) {
	t.Parallel()
	n := testcluster.StartServerNode(t, func(c *server.Config) {
		c.MaxRequestBytes = 64 << 10
		c.MaxInflightBodyBytes = 100 << 10
	})
	const size = 60 << 10
	body := padded(`{"resource":"budget/x"}`, size)
	slow := rawConn(t, n, "127.0.0.1")
	postHead(t, slow, "/leasehold.v1.Leases/Get", size)
	const sent = size - 100
	io.WriteString(slow, body[:sent]) // and the rest later: it holds what came of the budget

	eventually(t, 10*time.Second, "the first body's bytes were not counted in flight", func() bool {
		return metricValue(t, n, "leasehold_inflight_body_bytes") == sent
	})
	c := rawConn(t, n, "127.0.0.2")
	postHead(t, c, "/leasehold.v1.Leases/Get", size)
	io.WriteString(c, body)
	if status, reply := readReply(t, c, 10*time.Second); status != http.StatusTooManyRequests ||
		!strings.Contains(reply, "max_inflight_body_bytes") {
		t.Fatalf("a second 60 KiB body with a budget of 100 KiB: status %d %s, want 429 naming max_inflight_body_bytes", status, reply)
	}
	io.WriteString(slow, body[sent:])
	if status, reply := readReply(t, slow, 10*time.Second); status != http.StatusOK {
		t.Fatalf("the first body, completed: status %d %s", status, reply)
	}
	// Its bytes are given back when it is answered.
	eventually(t, 10*time.Second, "the first body's bytes were not given back", func() bool {
		return metricValue(t, n, "leasehold_inflight_body_bytes") == 0
	})
	if status, reply := postJSON(t, httpClient(t), n, "/leasehold.v1.Leases/Get", body); status != http.StatusOK {
		t.Fatalf("after the first was answered: status %d %v", status, reply)
	}
}

// A body that trickles in is cut off at the body timeout.
func TestSlowBodyTimesOut(t *testing.T) {
	t.Parallel()
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.BodyTimeout = time.Second })
	c := rawConn(t, n, "127.0.0.1")
	postHead(t, c, "/leasehold.v1.Leases/Get", 100)
	io.WriteString(c, `{"resource":`)
	start := time.Now()
	status, body := readReply(t, c, 15*time.Second)
	if status != http.StatusGatewayTimeout || !strings.Contains(body, "deadline_exceeded") || !strings.Contains(body, "did not arrive within 1s") {
		t.Fatalf("trickled body: status %d %s after %v, want 504 deadline_exceeded", status, body, time.Since(start))
	}
}

// Slow bodies from one address do not lock other callers out: bodies
// that declare the largest size and trickle hold only the bytes that came,
// and one address holds at most its share of the budget, whatever it
// sends.
func TestSlowBodiesDoNotLockOthersOut(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	// The share is a quarter of the budget or one request of the largest
	// size, if more: here 64 KiB of 128.
	n := testcluster.StartServerNode(t, func(c *server.Config) {
		c.MaxRequestBytes = limit
		c.MaxInflightBodyBytes = 2 * limit
	})
	const start = `{"ops":[`
	for range 2 {
		c := rawConn(t, n, "127.0.0.1")
		postHead(t, c, "/leasehold.v1.Leases/Batch", limit)
		io.WriteString(c, start) // and nothing more
	}
	eventually(t, 10*time.Second, "the trickling bodies hold more than what came", func() bool {
		return metricValue(t, n, "leasehold_inflight_body_bytes") == 2*int64(len(start))
	})
	other := leaseholdv1connect.NewLeasesClient(clientFrom(t, "127.0.0.2"), n.URL)
	mustRelease(t, other, mustAcquire(t, other, &pb.AcquireRequest{Resources: []string{"slow/x"}, Ttl: dur(time.Minute)}))

	// 50 KiB of a 60 KiB body from 127.0.0.1, and then of a second one.
	body := padded(`{"resource":"slow/x"}`, 60<<10)
	const sent = 50 << 10
	first := rawConn(t, n, "127.0.0.1")
	postHead(t, first, "/leasehold.v1.Leases/Get", len(body))
	io.WriteString(first, body[:sent])
	eventually(t, 10*time.Second, "the first body's bytes were not charged", func() bool {
		return metricValue(t, n, "leasehold_inflight_body_bytes") == 2*int64(len(start))+sent
	})
	second := rawConn(t, n, "127.0.0.1")
	postHead(t, second, "/leasehold.v1.Leases/Get", len(body))
	io.WriteString(second, body[:sent])
	if status, reply := readReply(t, second, 10*time.Second); status != http.StatusTooManyRequests ||
		!strings.Contains(reply, "127.0.0.1 is already sending") || !strings.Contains(reply, "limit max_inflight_body_bytes_per_client: 65536") {
		t.Fatalf("a second body from 127.0.0.1 past its share: status %d %s, want 429 naming max_inflight_body_bytes_per_client", status, reply)
	}
	// Another address still sends a body as large.
	if status, reply := postJSON(t, clientFrom(t, "127.0.0.2"), n, "/leasehold.v1.Leases/Get", body); status != http.StatusOK {
		t.Fatalf("a 60 KiB body from 127.0.0.2: status %d %v", status, reply)
	}
	io.WriteString(first, body[sent:])
	if status, reply := readReply(t, first, 10*time.Second); status != http.StatusOK {
		t.Fatalf("the first body, completed: status %d %s", status, reply)
	}
	wantMetric(t, n, `leasehold_refused_total{limit="max_inflight_body_bytes_per_client"}`)
}

// A session stream is bounded in time per message: one that stalls inside
// a message is ended at the body timeout, while one that is idle between
// messages for longer lives on.
func TestSessionMessageTimesOut(t *testing.T) {
	t.Parallel()
	const bodyTimeout = time.Second
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.BodyTimeout = bodyTimeout })

	idle := openSession(t, n, "")
	idle.send([]*pb.SessionOp{sop(1, opAcquire(&pb.AcquireRequest{Resources: []string{"st/idle"}, Ttl: dur(time.Minute)}))})
	_, got := idle.next(1)
	time.Sleep(3 * bodyTimeout) // idle between messages for longer than the body timeout
	lease := got[1].GetAcquire().GetLease()
	idle.send([]*pb.SessionOp{sop(2, opRelease(&pb.ReleaseRequest{LeaseId: lease.GetId(), Secret: got[1].GetAcquire().GetSecret()}))})
	if _, got := idle.next(1); got[2].GetError() != nil {
		t.Fatalf("a release after an idle while: %v", got[2].GetError())
	}

	// A message of 100 bytes of which 10 come.
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(append([]byte{0, 0, 0, 0, 100}, make([]byte, 10)...))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, n.URL+"/leasehold.v1.Sessions/Session", pr)
	req.Header.Set("Content-Type", "application/connect+proto")
	res, err := h2cClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	reply, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(reply), "deadline_exceeded") || !strings.Contains(string(reply), "a message of this stream did not arrive within 1s") {
		t.Fatalf("a stalled session message: %q, want deadline_exceeded naming the body timeout", reply)
	}
}

// The body timeout bounds the body only: an Acquire that waits longer
// than it for its grant, over HTTP/1.1 JSON or gRPC, still gets it.
func TestBodyTimeoutSparesWaitingAcquire(t *testing.T) {
	t.Parallel()
	const bodyTimeout = time.Second
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.BodyTimeout = bodyTimeout })
	c := newClient(t, n)
	clients := map[string]leaseholdv1connect.LeasesClient{
		"bt/json": newClient(t, n, connect.WithProtoJSON()),
		"bt/grpc": leaseholdv1connect.NewLeasesClient(h2cClient(t), n.URL, connect.WithGRPC()),
	}
	start := time.Now()
	holders := map[string]*acquired{}
	got := make(chan error, len(clients))
	for res, wc := range clients {
		holders[res] = mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(time.Minute)})
		go func() {
			a, err := acquire(t, wc, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(time.Minute), Wait: dur(time.Minute)})
			if err == nil && a.Lease.GetToken() == 0 {
				err = fmt.Errorf("granted without a token")
			}
			if err != nil {
				err = fmt.Errorf("%s: %w", res, err)
			}
			got <- err
		}()
	}
	for res := range clients {
		waitForWaiters(t, c, res, 1)
	}
	// Let the waiters outlive the body timeout before they are granted.
	time.Sleep(time.Until(start.Add(3 * bodyTimeout)))
	for _, h := range holders {
		mustRelease(t, c, h)
	}
	for range clients {
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("a waiter that outlived the body timeout: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a waiter was not answered 30s after the release")
		}
	}
}

// The default body limit holds the largest valid request, a Batch of
// MaxBatchOps acquires with every field at its limit, as protobuf and as
// JSON.
func TestLargestValidRequestFits(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	var ops []*pb.BatchOp
	md := map[string]string{}
	for k := range 4 {
		md[fmt.Sprint(k)+strings.Repeat("k", 9)] = strings.Repeat("v", leasehold.MaxMetadataBytes/4-10)
	}
	for i := range leasehold.MaxBatchOps {
		var rs []string
		for j := range leasehold.MaxResources {
			rs = append(rs, fmt.Sprintf("%03d-%02d-", i, j)+strings.Repeat("r", leasehold.MaxResourceLen-7))
		}
		// An invalid secret (the only rule broken) keeps the node from
		// granting 16384 resources: the test is about the body's size.
		ops = append(ops, opAcquire(&pb.AcquireRequest{Resources: rs, Ttl: dur(leasehold.MaxTTL), Wait: dur(leasehold.MaxWait),
			LockDelay: dur(leasehold.MaxLockDelay), MaxHold: dur(leasehold.MaxMaxHold),
			Owner: strings.Repeat("o", leasehold.MaxOwnerLen), Operation: strings.Repeat("p", leasehold.MaxOperationLen),
			Metadata: md, RequestId: strings.Repeat("i", leasehold.MaxRequestIDLen), Secret: strings.Repeat("z", 2*leasehold.SecretBytes)}))
	}
	req := &pb.BatchRequest{Ops: ops}
	for name, codec := range map[string][]connect.ClientOption{"protobuf": nil, "JSON": {connect.WithProtoJSON()}} {
		var size int
		if name == "JSON" {
			b, _ := protojson.Marshal(req)
			size = len(b)
		} else {
			size = proto.Size(req)
		}
		if size > server.DefaultMaxRequestBytes {
			t.Fatalf("%s: the largest valid batch is %d bytes, over the default limit %d", name, size, server.DefaultMaxRequestBytes)
		}
		rs := mustBatch(t, newClient(t, n, codec...), ops...)
		if e := rs[0].GetError(); e == nil || !strings.Contains(e.GetMessage(), "secret") {
			t.Fatalf("%s: first result %v, want the secret refused", name, rs[0])
		}
	}
}
