package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// pathCounter counts requests by RPC path and can hold up Batch answers.
type pathCounter struct {
	next http.RoundTripper
	mu   sync.Mutex
	hits map[string]int
	// slowAnswer delays handing back each Batch answer (after the server
	// has acted on it), ignoring the caller's context.
	slowAnswer time.Duration
}

func newPathCounter(t *testing.T) *pathCounter {
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return &pathCounter{next: tr, hits: map[string]int{}}
}

func (p *pathCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	p.mu.Lock()
	p.hits[method]++
	p.mu.Unlock()
	resp, err := p.next.RoundTrip(r)
	if err == nil && method == "Batch" && p.slowAnswer > 0 {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		time.Sleep(p.slowAnswer)
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		if rerr != nil {
			return nil, rerr
		}
	}
	return resp, err
}

func (p *pathCounter) count(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[method]
}

func TestConcurrentCallsShareBatchRequests(t *testing.T) {
	n := startNode(t)
	pc := newPathCounter(t)
	c := newClient(t, client.Config{HTTPClient: &http.Client{Transport: pc}}, n.URL)
	const workers, rounds = 32, 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	tokens := map[uint64]bool{}
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				l, err := c.Acquire(ctx, fmt.Sprintf("batch/%d/%d", w, i), client.ManualRenew(), client.ProgressTimeout(0))
				if err == nil {
					mu.Lock()
					if tokens[l.Token()] {
						err = fmt.Errorf("token %d handed out twice", l.Token())
					}
					tokens[l.Token()] = true
					mu.Unlock()
				}
				if err == nil {
					err = l.Renew(ctx)
				}
				if err == nil {
					err = l.Release(ctx)
				}
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ops := workers * rounds * 3
	batches := pc.count("Batch")
	t.Logf("%d operations in %d batch requests", ops, batches)
	if batches == 0 || batches >= ops {
		t.Errorf("%d operations went out in %d Batch requests; concurrent calls should share requests", ops, batches)
	}
	for _, m := range []string{"Acquire", "Renew", "Release"} {
		if k := pc.count(m); k != 0 {
			t.Errorf("%d %s requests: calls that need not wait should all go in batches", k, m)
		}
	}
}

func TestBatchedAcquireWaitsForItsPlace(t *testing.T) {
	n := startNode(t)
	pc := newPathCounter(t)
	c := newClient(t, client.Config{HTTPClient: &http.Client{Transport: pc}}, n.URL)
	holder := mustAcquire(t, c, []string{"batch/q"}, client.TTL(30*time.Second))
	type result struct {
		l   *client.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.Acquire(ctxFor(t, callTimeout), "batch/q", client.Wait(20*time.Second))
		got <- result{l, err}
	}()
	eventually(t, 5*time.Second, "the waiter is queued", func() bool { return len(get(t, c, "batch/q").Waiters) == 1 })
	select {
	case r := <-got:
		t.Fatalf("acquire returned while the resource was held: %v", r.err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := holder.Release(ctxFor(t, callTimeout)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiting acquire: %v", r.err)
	}
	hold(t, r.l)
	if r.l.Token() <= holder.Token() {
		t.Errorf("waiter's token %d is not above the previous holder's %d", r.l.Token(), holder.Token())
	}
	if pc.count("Acquire") != 1 {
		t.Errorf("%d Acquire requests; the queued acquire should wait for its place with exactly one", pc.count("Acquire"))
	}
	if w := get(t, c, "batch/q").Waiters; len(w) != 0 {
		t.Errorf("waiters left behind: %v", w)
	}
}

func TestAbandonedBatchedCallsAreGivenBack(t *testing.T) {
	n := startNode(t)
	pc := newPathCounter(t)
	pc.slowAnswer = 500 * time.Millisecond
	c := newClient(t, client.Config{HTTPClient: &http.Client{Transport: pc}}, n.URL)
	plain := nodeClient(t, n)

	// A grant whose caller left before the answer came back is released.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := c.Acquire(ctx, "batch/left", client.TTL(time.Minute))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire with a caller that left: %v, want DeadlineExceeded", err)
	}
	eventually(t, 5*time.Second, "the abandoned grant is released", func() bool {
		return get(t, plain, "batch/left").Holder == nil
	})

	// A place in line whose caller left is given up, so the next holder
	// is not an orphan that blocks the resource for its TTL.
	holder := mustAcquire(t, plain, []string{"batch/left"}, client.TTL(time.Minute))
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = c.Acquire(ctx, "batch/left", client.TTL(time.Minute), client.Wait(time.Minute))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting acquire with a caller that left: %v, want DeadlineExceeded", err)
	}
	eventually(t, 10*time.Second, "the abandoned place in line is withdrawn", func() bool {
		return len(get(t, plain, "batch/left").Waiters) == 0
	})
	if err := holder.Release(ctxFor(t, callTimeout)); err != nil {
		t.Fatal(err)
	}
	if h := get(t, plain, "batch/left").Holder; h != nil {
		t.Errorf("resource went to lease %d after its holder released; nobody was waiting", h.ID)
	}
}

func TestUnbatchedClientSendsEachCall(t *testing.T) {
	n := startNode(t)
	pc := newPathCounter(t)
	c := newClient(t, client.Config{HTTPClient: &http.Client{Transport: pc}, MaxBatch: 1}, n.URL)
	l := mustAcquire(t, c, []string{"batch/one"}, client.ManualRenew())
	if err := l.Renew(ctxFor(t, callTimeout)); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctxFor(t, callTimeout)); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"Acquire", "Renew", "Release"} {
		if pc.count(m) != 1 {
			t.Errorf("%d %s requests, want 1", pc.count(m), m)
		}
	}
	if pc.count("Batch") != 0 {
		t.Errorf("%d Batch requests from a client with MaxBatch 1", pc.count("Batch"))
	}
}

func TestBatchedErrorsKeepTheirCodes(t *testing.T) {
	n := startNode(t)
	c := nodeClient(t, n)
	other := nodeClient(t, n)
	mustAcquire(t, other, []string{"batch/held"})
	var wg sync.WaitGroup
	var held, ok atomic.Int32
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "batch/held"
			if i%2 == 1 {
				name = fmt.Sprintf("batch/free/%d", i)
			}
			l, err := c.Acquire(ctxFor(t, callTimeout), name)
			switch {
			case errors.Is(err, leasehold.ErrHeld):
				held.Add(1)
			case err == nil:
				hold(t, l)
				ok.Add(1)
			default:
				t.Errorf("acquire %s: %v", name, err)
			}
		}()
	}
	wg.Wait()
	if held.Load() != 4 || ok.Load() != 4 {
		t.Errorf("%d held and %d granted, want 4 and 4", held.Load(), ok.Load())
	}
	if _, err := client.New(client.Config{Endpoints: []string{n.URL}, MaxBatch: leasehold.MaxBatchOps + 1}); err == nil {
		t.Error("a MaxBatch above the server's limit was accepted")
	}
}
