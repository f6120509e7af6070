package client_test

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// recordingHandler keeps the messages of the records logged to it.
type recordingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "resources" {
			h.msgs = append(h.msgs, a.Value.String()+": "+r.Message)
		}
		return true
	})
	return nil
}

func (h *recordingHandler) logged(resource string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.msgs, func(m string) bool { return strings.HasPrefix(m, "["+resource+"]: ") })
}

// TestNilLoggerWritesNothingToTheDefaultLogger: a client made without
// Config.Logger logs nothing to the process's default logger, even for a
// warning (a degraded FailOpen lease); one given slog.Default() does.
// Not parallel: it swaps slog's default logger.
func TestNilLoggerWritesNothingToTheDefaultLogger(t *testing.T) {
	rec := &recordingHandler{}
	prev := slog.Default()
	slog.SetDefault(slog.New(rec))
	t.Cleanup(func() { slog.SetDefault(prev) })

	// Nothing listens at the endpoint: FailOpen hands out a degraded lease
	// and warns about it before Acquire returns.
	degrade := func(logger *slog.Logger, resource string) {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		c, err := client.New(client.Config{
			Endpoints: []string{"http://" + closedAddr(t)}, HTTPClient: &http.Client{Transport: tr},
			Logger: logger, RequestTimeout: 200 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l, err := c.Acquire(ctxFor(t, callTimeout), resource, client.FailOpen())
		if err != nil || !l.Degraded() {
			t.Fatalf("FailOpen acquire with no node: %v (degraded %v)", err, l != nil && l.Degraded())
		}
		l.Release(ctxFor(t, callTimeout))
	}

	degrade(nil, "log/silent")
	if rec.logged("log/silent") {
		t.Fatalf("a client without a Logger wrote to the default logger: %q", rec.msgs)
	}
	degrade(slog.Default(), "log/asked")
	if !rec.logged("log/asked") {
		t.Fatalf("a client given slog.Default() did not warn there (the check sees nothing): %q", rec.msgs)
	}
}
