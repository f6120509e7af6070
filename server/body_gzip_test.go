package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// gzipped compresses parts with gzip, flushed after each: a reader can
// inflate each part whole before the next one comes.
func gzipped(t testing.TB, parts ...[]byte) [][]byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	var out [][]byte
	for i, p := range parts {
		w.Write(p)
		if i == len(parts)-1 {
			w.Close()
		} else {
			w.Flush()
		}
		out = append(out, bytes.Clone(b.Bytes()))
		b.Reset()
	}
	return out
}

// wantBodyLimit fails t unless err is resource_exhausted with a message
// holding want.
func wantBodyLimit(t *testing.T, what string, err error, want string) {
	t.Helper()
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want resource_exhausted saying %q", what, err, want)
	}
}

// A body or a stream's message that decodes past the limit is cut off as
// it inflates and refused naming the limit, in every protocol and for
// every kind of call: unary, a server stream (watch) and the session
// stream.
func TestGzipBombRefusedAsItInflates(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.MaxRequestBytes = limit })
	const refused = "may hold 65536 bytes once decoded (limit max_request_bytes); this one is larger than that"

	// A Batch of 8 MiB of JSON (spaces, mostly) is 8 KB of gzip.
	bomb := gzipped(t, []byte(padded(`{"ops":[{"acquire":{"resources":["bomb/x"]}}]}`, 8<<20)))[0]
	if len(bomb) > 16<<10 {
		t.Fatalf("the bomb is %d bytes of gzip", len(bomb))
	}
	req, _ := http.NewRequest(http.MethodPost, n.URL+"/leasehold.v1.Leases/Batch", bytes.NewReader(bomb))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	res, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var reply bytes.Buffer
	reply.ReadFrom(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(reply.String(), "resource_exhausted") ||
		!strings.Contains(reply.String(), "a request body "+refused) {
		t.Errorf("an 8 KB gzip JSON Batch of 8 MiB: status %d %s, want 429 resource_exhausted naming the limit", res.StatusCode, reply.String())
	}

	// 1 MiB of one letter, in a field of each request.
	big := strings.Repeat("b", 1<<20)
	for name, opts := range map[string][]connect.ClientOption{
		"connect":  {connect.WithSendGzip()},
		"grpc":     {connect.WithGRPC(), connect.WithSendGzip()},
		"grpc-web": {connect.WithGRPCWeb(), connect.WithSendGzip()},
	} {
		t.Run(name, func(t *testing.T) {
			hc := h2cClient(t)
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			_, err := leaseholdv1connect.NewLeasesClient(hc, n.URL, opts...).Batch(ctx,
				connect.NewRequest(&pb.BatchRequest{Ops: []*pb.BatchOp{opAcquire(&pb.AcquireRequest{Resources: []string{big}})}}))
			wantBodyLimit(t, "unary Batch", err, refused)

			w, err := leaseholdv1connect.NewWatchClient(hc, n.URL, opts...).Watch(ctx,
				connect.NewRequest(&pb.WatchRequest{Prefixes: []string{big}}))
			if err == nil {
				for w.Receive() {
				}
				err = w.Err()
				w.Close()
			}
			wantBodyLimit(t, "Watch", err, refused)

			s := leaseholdv1connect.NewSessionsClient(hc, n.URL, opts...).Session(ctx)
			defer s.CloseResponse()
			if err := s.Send(&pb.SessionRequest{Ops: []*pb.SessionOp{sop(1, opAcquire(&pb.AcquireRequest{Resources: []string{big}}))}}); err != nil && !errors.Is(err, context.Canceled) {
				t.Logf("send: %v", err) // the stream may end before the send does
			}
			_, err = s.Receive()
			wantBodyLimit(t, "a session message", err, "a message of this stream "+refused)
		})
	}
	eventually(t, 10*time.Second, "bytes left charged after the bombs were refused", func() bool {
		return metricValue(t, n, "leasehold_inflight_body_bytes") == 0
	})
	wantMetric(t, n, `leasehold_refused_total{limit="max_request_bytes"}`)
}

// The budget counts the bytes bodies decode to, as they inflate: gzip
// bodies of a few hundred bytes each that inflate to 50 KiB fill a 128 KiB
// budget with two of them, the next ones are refused, and their bytes are
// given back once they are answered.
func TestGzipBodiesChargedAsTheyInflate(t *testing.T) {
	t.Parallel()
	const budget, part = 128 << 10, 50 << 10
	n := testcluster.StartServerNode(t, func(c *server.Config) {
		c.MaxRequestBytes = 64 << 10
		c.MaxInflightBodyBytes = budget
	})
	body := gzipped(t, []byte(padded(`{"ops":[{"acquire":{"resources":["gz/x"],"ttl":"10s"}}]}`, part)), []byte(strings.Repeat(" ", 1000)))
	const callers = 8
	held := 0
	var open []net.Conn
	for i := range callers {
		// Each from an address of its own: the budget refuses, not a share.
		c := rawConn(t, n, fmt.Sprintf("127.0.0.%d", 20+i))
		fmt.Fprintf(c, "POST /leasehold.v1.Leases/Batch HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"+
			"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n", len(body[0])+len(body[1]))
		c.Write(body[0]) // inflates to part bytes; the rest comes later
		if held+part <= budget {
			eventually(t, 10*time.Second, "the inflated part was not charged", func() bool {
				return metricValue(t, n, "leasehold_inflight_body_bytes") == int64(held+part)
			})
			held += part
			open = append(open, c)
			continue
		}
		if status, reply := readReply(t, c, 10*time.Second); status != http.StatusTooManyRequests ||
			!strings.Contains(reply, "limit max_inflight_body_bytes") {
			t.Fatalf("body %d, over the budget: status %d %s, want 429 naming max_inflight_body_bytes", i, status, reply)
		}
		if v := metricValue(t, n, "leasehold_inflight_body_bytes"); v > budget {
			t.Fatalf("%d bytes in flight, over the budget of %d", v, budget)
		}
	}
	if len(open) != budget/part {
		t.Fatalf("%d bodies held, want %d", len(open), budget/part)
	}
	for _, c := range open {
		c.Write(body[1])
		if status, reply := readReply(t, c, 10*time.Second); status != http.StatusOK {
			t.Fatalf("a held body, completed: status %d %s", status, reply)
		}
	}
	eventually(t, 10*time.Second, "the answered bodies' bytes were not given back", func() bool {
		return metricValue(t, n, "leasehold_inflight_body_bytes") == 0
	})
	wantMetric(t, n, `leasehold_refused_total{limit="max_inflight_body_bytes"}`)
}
