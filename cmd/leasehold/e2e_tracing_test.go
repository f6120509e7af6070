package main_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpCollector receives OTLP/HTTP trace exports on loopback and keeps
// the names of the spans of the service "leasehold".
type otlpCollector struct {
	mu    sync.Mutex
	spans map[string]bool
	err   error
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil && r.URL.Path != "/v1/traces" {
		err = fmt.Errorf("export to %s, want /v1/traces", r.URL.Path)
	}
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.err = err
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.spans[service+": "+s.Name] = true
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(nil) // an empty ExportTraceServiceResponse
}

// TestServeExportsTracesOverOTLP: with --otlp-endpoint, a node sends the
// spans of an acquire (its API call and its raft commit) to the collector
// over OTLP/HTTP; a malformed endpoint is a usage error.
func TestServeExportsTracesOverOTLP(t *testing.T) {
	t.Parallel()
	col := &otlpCollector{spans: map[string]bool{}}
	srv := httptest.NewServer(col)
	t.Cleanup(srv.Close)

	n := newNode(t)
	n.args = []string{"--otlp-endpoint", srv.URL}
	n.start()
	if r := lhEnv(t, childEnv(), "--endpoints", n.url, "acquire", "otlp/x", "--ttl", "30s"); r.code != 0 {
		t.Fatalf("acquire: %s", r)
	}
	// The CLI sends its acquire as a batch of one (the client coalesces).
	want := []string{"leasehold: leasehold.v1.Leases/Batch", "leasehold: raft commit"}
	checkFor(t, 20*time.Second, func() error { // the batcher sends every 5s by default
		col.mu.Lock()
		defer col.mu.Unlock()
		if col.err != nil {
			return col.err
		}
		for _, w := range want {
			if !col.spans[w] {
				return fmt.Errorf("no span %q among %v", w, col.spans)
			}
		}
		return nil
	})

	r := lhEnv(t, childEnv(), "serve", "--otlp-endpoint", "collector:4318", "--data-dir", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, `--otlp-endpoint "collector:4318"`) {
		t.Errorf("serve with a malformed --otlp-endpoint: want exit 2 naming the flag\n%s", r)
	}
}
