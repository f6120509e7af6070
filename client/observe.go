package client

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

// LeaderChange is a leader an observer sees, from the log index Index on.
// LeaseID 0 means nobody leads. Since and Candidates are known only for
// the first (the current leader when observing began).
type LeaderChange struct {
	ElectionInfo
	Index uint64
}

// Observer is a running observation of one election: read Leaders until
// it closes, then Err says why.
type Observer struct {
	leaders chan LeaderChange
	done    chan struct{}
	err     error
}

// Leaders delivers the current leader, then every change in log order,
// each once, until the observation ends.
func (o *Observer) Leaders() <-chan LeaderChange { return o.leaders }

// Err is nil after ctx ended; otherwise why the observation stopped (as
// Watch.Err).
func (o *Observer) Err() error {
	<-o.done
	return o.err
}

// Observe reports the leader of the election name, first the current one,
// then every change (a new leader, a proclaimed value, nobody leading),
// until ctx ends. Any node serves it from its own log; it resumes on
// another node from the last index seen when one fails, so every
// observer sees the same sequence of leaders.
func (c *Client) Observe(ctx context.Context, name string) *Observer {
	o := &Observer{leaders: make(chan LeaderChange, 16), done: make(chan struct{})}
	go func() {
		defer close(o.done)
		defer close(o.leaders)
		o.err = c.observe(ctx, name, o)
	}()
	return o
}

// observe takes the current leader and its index from the Observe call,
// then follows the election's changes after that index with a Watch,
// which resumes across nodes.
func (c *Client) observe(ctx context.Context, name string, o *Observer) error {
	first, err := c.currentLeader(ctx, name)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	select {
	case o.leaders <- first:
	case <-ctx.Done():
		return nil
	}
	w := c.Watch(ctx, []string{name}, FromIndex(first.Index))
	for ev := range w.Events() {
		if ev.Kind != "leader_changed" || len(ev.Resources) != 1 || ev.Resources[0] != name {
			continue
		}
		ch := LeaderChange{ElectionInfo: ElectionInfo{Name: name, LeaseID: ev.LeaseID, Token: ev.Token,
			Value: string(ev.Value), Owner: ev.Owner}, Index: ev.Index}
		select {
		case o.leaders <- ch:
		case <-ctx.Done():
		}
	}
	return w.Err()
}

// currentLeader is the first answer of an Observe stream, tried on one
// node after another while they are unavailable.
func (c *Client) currentLeader(ctx context.Context, name string) (LeaderChange, error) {
	ctx, stop := c.bound(ctx, 0)
	defer stop()
	var retry backoff
	var last error
	for {
		if c.closed.Load() {
			return LeaderChange{}, ErrClosed
		}
		i := int(c.cur.Load()) % len(c.nodes)
		first, err := c.firstObserved(ctx, &c.nodes[i], name)
		if err == nil {
			return first, nil
		}
		if ctx.Err() != nil {
			return LeaderChange{}, c.ended(ctx, last)
		}
		e := api.FromConnect(err)
		if connect.IsWireError(err) && !errors.Is(e, leasehold.ErrUnavailable) {
			return LeaderChange{}, e
		}
		last = e
		if !c.moveOn(ctx, i, retry.next()) {
			return LeaderChange{}, c.ended(ctx, last)
		}
	}
}

func (c *Client) firstObserved(ctx context.Context, e *endpoint, name string) (LeaderChange, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req := connect.NewRequest(&pb.ObserveRequest{Election: name})
	if c.cfg.Token != "" {
		req.Header().Set("Authorization", "Bearer "+c.cfg.Token)
	}
	s, err := e.elections.Observe(ctx, req)
	if err != nil {
		return LeaderChange{}, err
	}
	defer s.Close()
	if !s.Receive() {
		if err := s.Err(); err != nil {
			return LeaderChange{}, err
		}
		return LeaderChange{}, fmt.Errorf("observe stream from %s ended before its first answer", e.url)
	}
	m := s.Msg()
	return LeaderChange{ElectionInfo: electionInfo(m.Election), Index: m.Index}, nil
}
