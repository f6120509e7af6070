// Command go is the Go client's conformance driver: it runs one scenario
// file (conformance/scenarios) against LEASEHOLD_ENDPOINT with the public
// API of package client, and reports each step as a JSON line (see
// conformance/README.md for the protocol).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/fence/httpfence"
)

// step is one step of a scenario; each op reads the fields it needs.
type step struct {
	Op                string   `json:"op"`
	As                string   `json:"as"`
	Lease             string   `json:"lease"`
	Resource          string   `json:"resource"`
	TTLMs             int      `json:"ttl_ms"`
	WaitMs            int      `json:"wait_ms"`
	ProgressTimeoutMs *int     `json:"progress_timeout_ms"`
	Ms                int      `json:"ms"`
	EveryMs           int      `json:"every_ms"`
	WithinMs          int      `json:"within_ms"`
	MaxMs             int      `json:"max_ms"`
	Reason            string   `json:"reason"`
	Expect            string   `json:"expect"`
	ExpectStatus      int      `json:"expect_status"`
	Name              string   `json:"name"`
	Wait              bool     `json:"wait"`
	Count             int      `json:"count"`
	Names             []string `json:"names"`
	Key               string   `json:"key"`
	Queue             string   `json:"queue"`
	Body              string   `json:"body"`
	Max               int      `json:"max"`
	VisibilityMs      int      `json:"visibility_ms"`
	ExpectBodies      []string `json:"expect_bodies"`
	Delivery          string   `json:"delivery"`
	Callers           int      `json:"callers"`
	WorkMs            int      `json:"work_ms"`
	HeldForMs         int      `json:"held_for_ms"`
	SlackMs           int      `json:"slack_ms"`
}

type driver struct {
	c      *client.Client
	prefix string
	stdin  *bufio.Reader
	out    *json.Encoder

	mu         sync.Mutex
	leases     map[string]*client.Lease
	ctxs       map[string]context.Context
	pending    map[string]chan error
	order      []string
	deliveries map[string]leasehold.Delivery
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func main() {
	var sc struct{ Steps []step }
	b, err := os.ReadFile(os.Args[1])
	if err == nil {
		err = json.Unmarshal(b, &sc)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(2)
	}
	c, err := client.New(client.Config{Endpoints: []string{os.Getenv("LEASEHOLD_ENDPOINT")}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(2)
	}
	d := &driver{c: c, prefix: os.Getenv("LEASEHOLD_PREFIX"), stdin: bufio.NewReader(os.Stdin), out: json.NewEncoder(os.Stdout),
		leases: map[string]*client.Lease{}, ctxs: map[string]context.Context{}, pending: map[string]chan error{},
		deliveries: map[string]leasehold.Delivery{}}
	for i, s := range sc.Steps {
		if err := d.run(s); err != nil {
			d.out.Encode(map[string]any{"step": i, "op": s.Op, "ok": false, "error": err.Error()})
			os.Exit(1)
		}
		d.out.Encode(map[string]any{"step": i, "op": s.Op, "ok": true})
	}
	d.out.Encode(map[string]any{"done": true})
}

// code is the leasehold code name of err ("ok" for nil).
func code(err error) string {
	if err == nil {
		return "ok"
	}
	return leasehold.CodeOf(err).String()
}

// expect checks err against the step's expected code (default "ok").
func expect(s step, err error) error {
	want := s.Expect
	if want == "" {
		want = "ok"
	}
	if got := code(err); got != want {
		return fmt.Errorf("%s: got %s (%v), want %s", s.Op, got, err, want)
	}
	return nil
}

func (d *driver) lease(name string) (*client.Lease, context.Context, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.leases[name]
	if !ok {
		return nil, nil, fmt.Errorf("no lease %q", name)
	}
	return l, d.ctxs[name], nil
}

func (d *driver) acquire(s step) (*client.Lease, error) {
	opts := []client.Option{client.TTL(ms(s.TTLMs)), client.Wait(ms(s.WaitMs))}
	if s.ProgressTimeoutMs != nil {
		opts = append(opts, client.ProgressTimeout(ms(*s.ProgressTimeoutMs)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), ms(s.WaitMs)+30*time.Second)
	defer cancel()
	l, err := d.c.Acquire(ctx, d.prefix+s.Resource, opts...)
	if err == nil {
		d.mu.Lock()
		d.leases[s.As], d.ctxs[s.As] = l, l.Context(context.Background())
		d.mu.Unlock()
	}
	return l, err
}

// lost says whether the holder must stop: what a holder checks before
// each protected write. lease.Context ends when the client's renewal
// goroutine sees the deadline pass; after the process was paused, the
// holder's goroutine may run first and find ctx alive past the node's
// expiry (scenario 3 fails with ctx.Err() alone), so the holder also
// compares the clock with lease.Deadline(), which the client guarantees is
// never later than the node's expiry.
func lost(l *client.Lease, ctx context.Context) bool {
	return ctx.Err() != nil || !time.Now().Before(l.Deadline())
}

// reason names why the lease ended, as the scenarios do.
func reason(l *client.Lease) string {
	err := l.Err()
	switch {
	case errors.Is(err, client.ErrNoProgress):
		return "no_progress"
	case errors.Is(err, leasehold.ErrNotFound), errors.Is(err, leasehold.ErrNotHolder):
		return "ended"
	case errors.Is(err, client.ErrReleased):
		return "released"
	}
	return "deadline"
}

func (d *driver) run(s step) error {
	bg := context.Background()
	switch s.Op {
	case "acquire":
		_, err := d.acquire(s)
		return expect(s, err)
	case "acquire_async":
		done := make(chan error, 1)
		d.mu.Lock()
		d.pending[s.As] = done
		d.mu.Unlock()
		go func() {
			l, err := d.acquire(s)
			if err == nil {
				d.mu.Lock()
				d.order = append(d.order, s.As)
				d.mu.Unlock()
				err = l.Release(bg)
			}
			done <- err
		}()
		return nil
	case "await":
		d.mu.Lock()
		done := d.pending[s.As]
		d.mu.Unlock()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return fmt.Errorf("%s still waiting", s.As)
		}
	case "waiters":
		return poll(ms(s.WithinMs), func() error {
			info, err := d.c.Get(bg, d.prefix+s.Resource)
			if err != nil {
				return err
			}
			if len(info.Waiters) != s.Count {
				return fmt.Errorf("%d waiters, want %d", len(info.Waiters), s.Count)
			}
			return nil
		})
	case "expect_order":
		d.mu.Lock()
		defer d.mu.Unlock()
		if !slices.Equal(d.order, s.Names) {
			return fmt.Errorf("granted in order %v, want %v", d.order, s.Names)
		}
		return nil
	case "release":
		l, _, err := d.lease(s.Lease)
		if err != nil {
			return err
		}
		return expect(s, l.Release(bg))
	case "progress_for":
		l, ctx, err := d.lease(s.Lease)
		if err != nil {
			return err
		}
		for end := time.Now().Add(ms(s.Ms)); time.Now().Before(end); time.Sleep(ms(s.EveryMs)) {
			if lost(l, ctx) {
				return fmt.Errorf("lost while reporting progress: %v", l.Err())
			}
			l.Progress("working")
		}
		return nil
	case "expect_lost":
		l, ctx, err := d.lease(s.Lease)
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(ms(s.WithinMs)):
			return fmt.Errorf("not lost within %dms", s.WithinMs)
		}
		if s.Reason != "" && reason(l) != s.Reason {
			return fmt.Errorf("lost as %s (%v), want %s", reason(l), l.Err(), s.Reason)
		}
		return nil
	case "expect_free":
		return poll(ms(s.WithinMs), func() error {
			info, err := d.c.Get(bg, d.prefix+s.Resource)
			if err != nil {
				return err
			}
			if info.Holder != nil {
				return fmt.Errorf("still held by lease %d", info.Holder.ID)
			}
			return nil
		})
	case "emit":
		l, _, err := d.lease(s.Lease)
		if err != nil {
			return err
		}
		return d.out.Encode(map[string]any{"lease": s.Lease, "id": l.ID(), "token": l.Token(), "resource": d.prefix + s.Resource})
	case "sync":
		if err := d.out.Encode(map[string]any{"sync": s.Name}); err != nil {
			return err
		}
		if s.Wait {
			_, err := d.stdin.ReadString('\n')
			return err
		}
		return nil
	case "work_until_lost":
		l, ctx, err := d.lease(s.Lease)
		if err != nil {
			return err
		}
		for end := time.Now().Add(ms(s.MaxMs)); time.Now().Before(end); time.Sleep(ms(s.EveryMs)) {
			if lost(l, ctx) {
				return d.out.Encode(map[string]any{"event": "lost", "reason": reason(l)})
			}
			d.out.Encode(map[string]any{"event": "work"})
			l.Progress("working")
		}
		return errors.New("never lost")
	case "fenced_put", "check_fence":
		l, _, err := d.lease(s.Lease)
		if err != nil {
			return err
		}
		if s.Op == "check_fence" {
			return expect(s, d.c.CheckFence(bg, d.prefix+s.Resource, l.Token()))
		}
		_, err = d.c.Put(bg, d.prefix+s.Key, []byte("v"), client.FencedBy(l, d.prefix+s.Resource))
		return expect(s, err)
	case "http_fence":
		l, _, err := d.lease(s.Lease)
		if err != nil {
			return err
		}
		hc := &http.Client{Transport: &httpfence.Transport{Resource: d.prefix + s.Resource, Source: l}}
		resp, err := hc.Post(os.Getenv("LEASEHOLD_FENCE_URL"), "text/plain", nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != s.ExpectStatus {
			return fmt.Errorf("fenced request answered %d, want %d", resp.StatusCode, s.ExpectStatus)
		}
		return nil
	case "queue_create":
		_, err := d.c.CreateQueue(bg, d.prefix+s.Queue, client.QueueSettings{Visibility: ms(s.VisibilityMs)})
		return expect(s, err)
	case "queue_send":
		_, err := d.c.Send(bg, d.prefix+s.Queue, leasehold.Message{Key: s.Key, Body: []byte(s.Body)})
		return expect(s, err)
	case "queue_receive":
		var opts []client.ReceiveOption
		if s.VisibilityMs > 0 {
			opts = append(opts, client.VisibilityTimeout(ms(s.VisibilityMs)))
		}
		if s.WaitMs > 0 {
			opts = append(opts, client.PollWait(ms(s.WaitMs)))
		}
		ds, err := d.c.Receive(bg, d.prefix+s.Queue, max(s.Max, 1), opts...)
		if err != nil {
			return err
		}
		bodies := []string{}
		for _, dl := range ds {
			bodies = append(bodies, string(dl.Body))
			d.deliveries[s.As+string(dl.Body)] = dl
		}
		sort.Strings(bodies)
		want := slices.Clone(s.ExpectBodies)
		sort.Strings(want)
		if !slices.Equal(bodies, want) {
			return fmt.Errorf("received %v, want %v", bodies, want)
		}
		return nil
	case "queue_ack":
		dl, ok := d.deliveries[s.Delivery]
		if !ok {
			return fmt.Errorf("no delivery %q", s.Delivery)
		}
		return expect(s, d.c.Ack(bg, dl))
	case "sleep":
		time.Sleep(ms(s.Ms))
		return nil
	case "idem_concurrent":
		return d.idemConcurrent(s)
	case "expect_deadline_from_send":
		return d.deadlineFromSend(s)
	}
	return fmt.Errorf("unknown op %q", s.Op)
}

// idemConcurrent runs s.Callers callers of one key through
// client.Idempotent at once, then one more: the work must run once and
// every caller get its result.
func (d *driver) idemConcurrent(s step) error {
	var mu sync.Mutex
	runs := 0
	fn := func(ctx context.Context, token uint64) ([]byte, error) {
		mu.Lock()
		runs++
		mu.Unlock()
		time.Sleep(ms(s.WorkMs))
		return fmt.Appendf(nil, "done by %d", token), nil
	}
	key, fp := d.prefix+s.Key, client.FingerprintOf([]byte("conformance"))
	results := make([]string, s.Callers+1)
	errs := make([]error, s.Callers+1)
	var wg sync.WaitGroup
	for i := range s.Callers {
		wg.Go(func() {
			r, err := client.Idempotent(context.Background(), d.c, key, fp, fn, client.WaitFor(10*time.Second))
			results[i], errs[i] = string(r), err
		})
	}
	wg.Wait()
	r, err := client.Idempotent(context.Background(), d.c, key, fp, fn)
	results[s.Callers], errs[s.Callers] = string(r), err
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if runs != 1 {
		return fmt.Errorf("the work ran %d times", runs)
	}
	for _, r := range results {
		if r != results[0] {
			return fmt.Errorf("results differ: %q", results)
		}
	}
	return nil
}

// deadlineFromSend has a waiter granted s.HeldForMs after it sent its
// acquire, and checks its deadline against the time of the send.
func (d *driver) deadlineFromSend(s step) error {
	ctx := context.Background()
	ttl, resource := ms(s.TTLMs), d.prefix+s.Resource
	h, err := d.c.Acquire(ctx, resource, client.TTL(ttl))
	if err != nil {
		return err
	}
	type granted struct {
		l    *client.Lease
		sent time.Time
		err  error
	}
	got := make(chan granted, 1)
	go func() {
		sent := time.Now()
		l, err := d.c.Acquire(ctx, resource, client.TTL(ttl), client.Wait(time.Minute))
		got <- granted{l, sent, err}
	}()
	time.Sleep(ms(s.HeldForMs))
	if err := h.Release(ctx); err != nil {
		return err
	}
	g := <-got
	if g.err != nil {
		return g.err
	}
	defer g.l.Release(ctx)
	return checkDeadline(g.l.Deadline().Sub(g.sent), s)
}

// checkDeadline checks a deadline's distance from the send against the
// client's defaults (10ms + 2% of the TTL).
func checkDeadline(after time.Duration, s step) error {
	ttl := ms(s.TTLMs)
	bound := ttl - 10*time.Millisecond - ttl/50
	if after > bound+ms(s.SlackMs) {
		return fmt.Errorf("deadline %v after the send, more than ttl less the drift allowance (%v): counted from later than the send", after, bound)
	}
	if after < bound-ms(s.HeldForMs)/2 {
		return fmt.Errorf("deadline %v after the send, far less than %v", after, bound)
	}
	return nil
}

// poll calls f until it returns nil or within passes.
func poll(within time.Duration, f func() error) error {
	end := time.Now().Add(within)
	for {
		err := f()
		if err == nil || time.Now().After(end) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
