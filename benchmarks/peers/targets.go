package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/leasehold/leasehold/client"
)

// A locker takes and gives back a lock on a named resource for one worker,
// waiting in line if it is held.
type locker interface {
	lock(ctx context.Context, worker int, resource string) (unlock func(context.Context) error, err error)
	close()
}

// Target names, in the order each scenario runs them.
const (
	targetEtcd   = "etcd"
	targetOwn    = "leasehold, client per worker"
	targetShared = "leasehold, shared client"
	// With -baseline: the same two shapes on another leasehold build.
	targetBaseOwn    = "baseline, client per worker"
	targetBaseShared = "baseline, shared client"
	lockTTL          = 15 * time.Second
	lockWait         = 30 * time.Second
	sessionTTLSecs   = 15
)

// etcdLocker is how etcd's own documentation takes a lock: one clientv3
// shared by the process, one session (a lease kept alive) per worker, and
// concurrency.Mutex, which queues waiters by key revision.
type etcdLocker struct {
	cli      *clientv3.Client
	sessions []*concurrency.Session
}

func newEtcdLocker(endpoints []string, workers int) (*etcdLocker, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	e := &etcdLocker{cli: cli}
	for range workers {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(sessionTTLSecs))
		if err != nil {
			e.close()
			return nil, fmt.Errorf("etcd session: %w", err)
		}
		e.sessions = append(e.sessions, s)
	}
	return e, nil
}

func (e *etcdLocker) lock(ctx context.Context, worker int, resource string) (func(context.Context) error, error) {
	m := concurrency.NewMutex(e.sessions[worker], "/peers-bench/"+resource)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (e *etcdLocker) close() {
	for _, s := range e.sessions {
		s.Close()
	}
	e.cli.Close()
}

// leaseholdLocker takes leases through the Go client, one client per
// worker (as separate processes would) or one shared by all (as the
// goroutines of one process would), renewing nothing: the critical
// section is empty.
type leaseholdLocker struct {
	clients []*client.Client
	opts    []client.Option
}

// clientSession is the Go clients' Config.Session (the -session flag).
var clientSession client.SessionMode

func newLeaseholdLocker(endpoints []string, workers int, shared bool) (*leaseholdLocker, error) {
	l := &leaseholdLocker{opts: []client.Option{client.TTL(lockTTL), client.Wait(lockWait),
		client.ManualRenew(), client.ProgressTimeout(0), client.Owner("peers-bench")}}
	var one *client.Client
	for range workers {
		c := one
		if c == nil {
			var err error
			c, err = client.New(client.Config{Endpoints: endpoints, Logger: slog.New(slog.DiscardHandler), Session: clientSession})
			if err != nil {
				l.close()
				return nil, err
			}
		}
		if shared {
			one = c
		}
		l.clients = append(l.clients, c)
	}
	return l, nil
}

func (l *leaseholdLocker) lock(ctx context.Context, worker int, resource string) (func(context.Context) error, error) {
	lease, err := l.clients[worker].Acquire(ctx, resource, l.opts...)
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

func (l *leaseholdLocker) close() {
	seen := map[*client.Client]bool{}
	for _, c := range l.clients {
		if !seen[c] {
			seen[c] = true
			c.Close()
		}
	}
}
