package faults

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/client"
	hist "github.com/leasehold/leasehold/internal/history"
)

// A client process is this test binary re-executed with clientModeEnv set:
// it acquires one resource and writes fenced values under it until it is
// killed, printing each acknowledgement as it gets it. Signals to it are
// faults of a real client: a pause (GC, swap, SIGSTOP) outlasting its
// lease, or a crash.
const (
	clientModeEnv      = "LEASEHOLD_FAULTS_CLIENT"
	clientEndpointsEnv = "LEASEHOLD_FAULTS_ENDPOINTS"
	clientTTL          = 3 * time.Second
	clientLifetime     = 3 * time.Minute // a leaked client process ends by itself
)

// clientMain runs the client process. Output lines:
//
//	grant LEASE_ID TOKEN
//	ack KEY VERSION       (the value written is the key)
//	refused KEY CODE
func clientMain() int {
	resource := os.Getenv(clientModeEnv)
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv(clientEndpointsEnv), ","),
		Logger: slog.New(slog.DiscardHandler), RequestTimeout: 3 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), clientLifetime)
	defer cancel()
	l, err := c.Acquire(ctx, resource, client.TTL(clientTTL), client.Wait(30*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "acquire:", err)
		return 1
	}
	token := l.Token() // kept: a paused holder wakes up believing in it
	fmt.Printf("grant %d %d\n", l.ID(), token)
	for n := 0; ctx.Err() == nil; n++ {
		key := fmt.Sprintf("%s/client/%d", resource, n)
		v, err := c.Put(ctx, key, []byte(key), client.Fence(resource, token))
		if err != nil {
			fmt.Printf("refused %s %s\n", key, leasehold.CodeOf(err))
		} else {
			fmt.Printf("ack %s %d\n", key, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0
}

// clientProc is a running client process.
type clientProc struct {
	*proc
	resource string
}

func startClientProc(t testing.TB, resource string, endpoints []string) *clientProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := childEnv(clientModeEnv+"="+resource, clientEndpointsEnv+"="+strings.Join(endpoints, ","))
	name := "client-" + strings.ReplaceAll(resource, "/", "_")
	p, err := startProc(t, t.TempDir(), name, env, self)
	if err != nil {
		t.Fatal(err)
	}
	return &clientProc{proc: p, resource: resource}
}

// clientOutput is what a client process printed so far.
type clientOutput struct {
	leaseID, token uint64 // 0 until granted
	acks           []hist.Write
	refused        int
}

func (p *clientProc) output() clientOutput {
	var o clientOutput
	sc := bufio.NewScanner(strings.NewReader(p.Stdout()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 { // a line cut by a kill
			continue
		}
		switch f[0] {
		case "grant":
			o.leaseID, _ = strconv.ParseUint(f[1], 10, 64)
			o.token, _ = strconv.ParseUint(f[2], 10, 64)
		case "ack":
			v, err := strconv.ParseUint(f[2], 10, 64)
			if err == nil {
				o.acks = append(o.acks, hist.Write{Key: f[1], Value: []byte(f[1]), Version: v, Resource: p.resource, Token: o.token})
			}
		case "refused":
			o.refused++
		}
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
			return fmt.Errorf("client process has not %s yet: %+v", what, o)
		}
		return nil
	})
}
