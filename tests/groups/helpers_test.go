package groups_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/groups"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// newClient makes a client for endpoints with its own transport, closed
// with the client when the test ends.
func newClient(t testing.TB, endpoints ...string) *client.Client {
	t.Helper()
	tr := &http.Transport{}
	c, err := client.New(client.Config{Endpoints: endpoints, HTTPClient: &http.Client{Transport: tr}, Logger: testcluster.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); tr.CloseIdleConnections() })
	return c
}

func createGroup(t testing.TB, c *client.Client, name string, partitions int) {
	t.Helper()
	if _, err := c.CreateGroup(testutil.Context(t, 10*time.Second), name, partitions); err != nil {
		t.Fatalf("create group %s: %v", name, err)
	}
}

// runMember runs groups.Run for member in the background until the test
// ends or stop is called; stop waits for Run to return and fails the test
// on its error.
func runMember(t testing.TB, c *client.Client, group, member string, fn groups.Func, opts ...groups.Option) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- groups.Run(ctx, c, group, member, fn, opts...) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run(%s): %v", member, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("Run(%s) did not return 30s after its context ended", member)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// tracker records which member runs which partition, and fails the test
// when a partition starts on one member while another still runs it.
type tracker struct {
	t       testing.TB
	mu      sync.Mutex
	running map[int]string
	epochs  map[int]uint64 // the last epoch each partition started with
	starts  int
}

func newTracker(t testing.TB) *tracker {
	return &tracker{t: t, running: map[int]string{}, epochs: map[int]uint64{}}
}

// fn works until its context ends, then takes slowStop to stop, like a
// worker that finishes its batch first.
func (tr *tracker) fn(member string, slowStop time.Duration) groups.Func {
	return func(ctx context.Context, p int, epoch uint64) error {
		tr.mu.Lock()
		if other, ok := tr.running[p]; ok {
			tr.t.Errorf("partition %d started on %s (epoch %d) while %s still runs it", p, member, epoch, other)
		}
		if epoch <= tr.epochs[p] {
			tr.t.Errorf("partition %d started on %s with epoch %d, not above the last one %d", p, member, epoch, tr.epochs[p])
		}
		tr.running[p], tr.epochs[p] = member, epoch
		tr.starts++
		tr.mu.Unlock()
		<-ctx.Done()
		time.Sleep(slowStop)
		tr.mu.Lock()
		delete(tr.running, p)
		tr.mu.Unlock()
		return nil
	}
}

// owned counts the partitions each member runs now.
func (tr *tracker) owned() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[string]int{}
	for _, m := range tr.running {
		out[m]++
	}
	return out
}
