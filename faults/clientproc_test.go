package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	hist "github.com/leasehold/leasehold/internal/history"
)

// A client process is this test binary re-executed with clientModeEnv set:
// it acquires one resource and works under it (clientOpts.Work), printing
// each event as it happens. Signals to it are faults of a real client: a
// pause (GC, swap, SIGSTOP) outlasting its lease, or a crash; SIGUSR1
// asks it to release.
const (
	clientModeEnv      = "LEASEHOLD_FAULTS_CLIENT"
	clientEndpointsEnv = "LEASEHOLD_FAULTS_ENDPOINTS"
	clientOptsEnv      = "LEASEHOLD_FAULTS_CLIENT_OPTS"
	clientTTL          = 3 * time.Second
	clientLifetime     = 3 * time.Minute // a leaked client process ends by itself
)

// clientOpts shape a client process; the zero value is a zombie writer
// with a 3s TTL.
type clientOpts struct {
	TTL  time.Duration // default clientTTL
	Wait time.Duration // how long Acquire may wait; default 30s
	// Work is what it does once granted: "zombie" (or ""): fenced writes
	// with its token until killed, whatever becomes of its lease; "worker":
	// fenced writes under lease.Context, stopping when the lease ends;
	// "hold": nothing (it renews, or not, and waits); "contend": on
	// SIGUSR1, Rounds acquisitions one after another, each held for a
	// moment and released.
	Work   string
	Rounds int
	// ManualRenew: the lease is not renewed, so it lapses at its deadline.
	ManualRenew bool
	// PG, a Postgres DSN, sends the writes to the table downstream through
	// pgfence (see downstream_test.go) instead of to leasehold's KV.
	PG string
}

// monoNow is CLOCK_MONOTONIC in nanoseconds, the one clock every process
// of a time namespace shares.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// emit prints one event line: the event, CLOCK_MONOTONIC, then its fields.
//
//	ready MONO                 (contend: waiting for SIGUSR1 to start)
//	acquire MONO               (contend: about to acquire)
//	grant MONO LEASE_ID TOKEN
//	ack MONO KEY VERSION       (the value written is the key)
//	refused MONO KEY CODE
//	lost MONO CODE             (the lease ended without a release)
//	release MONO               (about to release)
//	released MONO CODE         ("ok", or the release's error code)
func emit(event string, fields ...any) {
	parts := append([]any{event, monoNow()}, fields...)
	fmt.Println(parts...)
}

// clientMain runs the client process.
func clientMain() int {
	resource := os.Getenv(clientModeEnv)
	var o clientOpts
	if s := os.Getenv(clientOptsEnv); s != "" {
		if err := json.Unmarshal([]byte(s), &o); err != nil {
			fmt.Fprintln(os.Stderr, "client options:", err)
			return 2
		}
	}
	o.TTL = cmpOr(o.TTL, clientTTL)
	o.Wait = cmpOr(o.Wait, 30*time.Second)
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv(clientEndpointsEnv), ","),
		Logger: slog.New(slog.DiscardHandler), RequestTimeout: 3 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), clientLifetime)
	defer cancel()
	w, err := newWriter(ctx, c, o.PG)
	if err != nil {
		fmt.Fprintln(os.Stderr, "downstream:", err)
		return 2
	}
	opts := []client.Option{client.TTL(o.TTL), client.Wait(o.Wait)}
	if o.ManualRenew {
		opts = append(opts, client.ManualRenew())
	}
	release := make(chan os.Signal, 1)
	signal.Notify(release, syscall.SIGUSR1)
	if o.Work == "contend" {
		emit("ready")
		<-release
		return contend(ctx, c, resource, o.Rounds, opts)
	}
	l, err := c.Acquire(ctx, resource, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "acquire:", err)
		return 1
	}
	token := l.Token() // kept: a paused holder wakes up believing in it
	emit("grant", l.ID(), token)
	go func() {
		<-l.Done()
		if err := l.Err(); !isReleased(err) {
			emit("lost", leasehold.CodeOf(err))
		}
	}()
	go func() {
		<-release
		emit("release")
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err := l.Release(rctx)
		emit("released", codeOrOK(err))
	}()
	work := ctx
	switch o.Work {
	case "hold":
		<-ctx.Done()
		return 0
	case "worker":
		work = l.Context(ctx)
	}
	for n := 0; work.Err() == nil; n++ {
		key := fmt.Sprintf("%s/client/%d", resource, n)
		if v, err := w.write(work, key, resource, token); err != nil {
			if work.Err() == nil {
				emit("refused", key, leasehold.CodeOf(err))
			}
		} else {
			emit("ack", key, v)
		}
		sleepCtx(work, 50*time.Millisecond)
	}
	if o.Work == "worker" {
		<-ctx.Done() // stay, as a process would, until killed
	}
	return 0
}

// contend acquires resource rounds times, holding it for a moment each
// time: the moments must never overlap between processes.
func contend(ctx context.Context, c *client.Client, resource string, rounds int, opts []client.Option) int {
	for range rounds {
		emit("acquire")
		l, err := c.Acquire(ctx, resource, opts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "acquire:", err)
			return 1
		}
		emit("grant", l.ID(), l.Token())
		time.Sleep(50 * time.Millisecond) // the work done under the lease
		emit("release")
		emit("released", codeOrOK(l.Release(ctx)))
	}
	return 0
}

func isReleased(err error) bool { return err == nil || errors.Is(err, client.ErrReleased) }

func codeOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return leasehold.CodeOf(err).String()
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// clientProc is a running client process.
type clientProc struct {
	*proc
	resource string
}

// startClientProc starts a client process for resource with opts, through
// wrap (a command and its arguments put before the binary, such as
// unshare's; none if empty).
func startClientProc(t testing.TB, resource string, endpoints []string, opts clientOpts, wrap ...string) *clientProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(opts)
	env := childEnv(clientModeEnv+"="+resource, clientEndpointsEnv+"="+strings.Join(endpoints, ","), clientOptsEnv+"="+string(js))
	name := fmt.Sprintf("client-%s-%d", strings.ReplaceAll(resource, "/", "_"), time.Now().UnixNano())
	bin, args := wrapCmd(wrap, self)
	p, err := startProc(t, t.TempDir(), name, env, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return &clientProc{proc: p, resource: resource}
}

// wrapCmd puts the command wrap (such as unshare and its flags), if any,
// before bin and its args.
func wrapCmd(wrap []string, bin string, args ...string) (string, []string) {
	if len(wrap) == 0 {
		return bin, args
	}
	return wrap[0], append(append(slices.Clone(wrap[1:]), bin), args...)
}

// clientEvent is one line a client process printed.
type clientEvent struct {
	kind string
	mono int64 // CLOCK_MONOTONIC of its time namespace
	args []string
}

// clientOutput is what a client process printed so far.
type clientOutput struct {
	leaseID, token uint64 // of the last grant; 0 until granted
	events         []clientEvent
	acks           []hist.Write
	refused        int
	lost           *clientEvent
	released       *clientEvent
}

func (o clientOutput) String() string {
	s := fmt.Sprintf("lease %d (token %d), %d events: %d writes acknowledged, %d refused", o.leaseID, o.token, len(o.events), len(o.acks), o.refused)
	if o.lost != nil {
		s += ", lease lost: " + o.lost.args[0]
	}
	if o.released != nil {
		s += ", released: " + o.released.args[0]
	}
	return s
}

// count is the number of events of kind.
func (o clientOutput) count(kind string) int {
	n := 0
	for _, e := range o.events {
		if e.kind == kind {
			n++
		}
	}
	return n
}

func (p *clientProc) output() clientOutput {
	var o clientOutput
	sc := bufio.NewScanner(strings.NewReader(p.Stdout()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		mono, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue // a line cut by a kill
		}
		e := clientEvent{kind: f[0], mono: mono, args: f[2:]}
		switch {
		case e.kind == "grant" && len(e.args) == 2:
			o.leaseID, _ = strconv.ParseUint(e.args[0], 10, 64)
			o.token, _ = strconv.ParseUint(e.args[1], 10, 64)
		case e.kind == "ack" && len(e.args) == 2:
			v, err := strconv.ParseUint(e.args[1], 10, 64)
			if err != nil {
				continue
			}
			o.acks = append(o.acks, hist.Write{Key: e.args[0], Value: []byte(e.args[0]), Version: v, Resource: p.resource, Token: o.token})
		case e.kind == "refused" && len(e.args) == 2:
			o.refused++
		case e.kind == "lost" && len(e.args) == 1:
			o.lost = &e
		case e.kind == "released" && len(e.args) == 1:
			o.released = &e
		case (e.kind == "release" || e.kind == "ready" || e.kind == "acquire") && len(e.args) == 0:
		default:
			continue // cut short by a kill
		}
		o.events = append(o.events, e)
	}
	return o
}

// waitOutput waits until the client process printed what ok wants.
func (p *clientProc) waitOutput(timeout time.Duration, what string, ok func(clientOutput) bool) error {
	return checkFor(timeout, func() error {
		if o := p.output(); !ok(o) {
			if p.Exited() {
				return fmt.Errorf("client process exited (%v) before %s: %s", p.Err, what, lastLines(p.Stderr(), 4))
			}
			return fmt.Errorf("client process has not %s yet: %s", what, o)
		}
		return nil
	})
}
