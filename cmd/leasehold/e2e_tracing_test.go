package main_test

import (
	"encoding/hex"
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
// the spans' names ("service: name") and, by name, their trace ids, and
// every export as it came.
type otlpCollector struct {
	mu     sync.Mutex
	spans  map[string]bool
	traces map[string]map[string]bool // "service: name" -> trace ids (hex)
	raw    [][]byte
	err    error
}

func newCollector() *otlpCollector {
	return &otlpCollector{spans: map[string]bool{}, traces: map[string]map[string]bool{}}
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
	c.raw = append(c.raw, body)
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
				k := service + ": " + s.Name
				c.spans[k] = true
				if c.traces[k] == nil {
					c.traces[k] = map[string]bool{}
				}
				c.traces[k][hex.EncodeToString(s.TraceId)] = true
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(nil) // an empty ExportTraceServiceResponse
}

// TestServeExportsTracesOverOTLP: with --otlp-endpoint, a node sends the
// spans of an acquire (its API call and its raft commit) to the collector
// over OTLP/HTTP; a malformed endpoint is a usage error. A client command
// given --otlp-endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT) sends its own
// spans before it exits — the command's and its calls' — and its
// traceparent: the node's span of its call is in the command's trace.
func TestServeExportsTracesOverOTLP(t *testing.T) {
	t.Parallel()
	col := newCollector()
	srv := httptest.NewServer(col)
	t.Cleanup(srv.Close)

	n := newNode(t)
	n.args = []string{"--otlp-endpoint", srv.URL}
	n.start()
	if r := lhEnv(t, childEnv(), "--endpoints", n.url, "--otlp-endpoint", srv.URL, "acquire", "otlp/x", "--ttl", "30s"); r.code != 0 {
		t.Fatalf("acquire: %s", r)
	}
	if r := lhEnv(t, append(childEnv(), "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL), "--endpoints", n.url, "elections"); r.code != 0 {
		t.Fatalf("elections: %s", r)
	}
	// Flushed before the commands exited: no waiting.
	col.mu.Lock()
	for _, w := range []string{"leasehold-cli: leasehold acquire", "leasehold-cli: leasehold.v1.Leases/Batch",
		"leasehold-cli: leasehold elections", "leasehold-cli: leasehold.v1.Elections/List"} {
		if !col.spans[w] {
			t.Errorf("the CLI did not send span %q before exiting; got %v", w, col.spans)
		}
	}
	cliTraces := col.traces["leasehold-cli: leasehold acquire"]
	col.mu.Unlock()
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
		for id := range cliTraces {
			if col.traces["leasehold: leasehold.v1.Leases/Batch"][id] {
				return nil
			}
		}
		return fmt.Errorf("the node's Leases/Batch spans (traces %v) are not in the CLI's acquire trace %v",
			col.traces["leasehold: leasehold.v1.Leases/Batch"], cliTraces)
	})

	r := lhEnv(t, childEnv(), "serve", "--otlp-endpoint", "collector:4318", "--data-dir", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, `--otlp-endpoint "collector:4318"`) {
		t.Errorf("serve with a malformed --otlp-endpoint: want exit 2 naming the flag\n%s", r)
	}
}
