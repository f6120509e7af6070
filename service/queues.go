package service

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/fsm"
)

// Keyed queues on a node: the commands go through the log as they are;
// Receive long-polls, and the reads verify leadership first.
type (
	QueueCreate   = fsm.QueueCreate
	QueueSettings = fsm.QueueSettings
	QueueMessage  = fsm.QueueMessage
	QueueSend     = fsm.QueueSend
	QueueReceive  = fsm.QueueReceive
	QueueAck      = fsm.QueueAck
	QueueNack     = fsm.QueueNack
	QueueExtend   = fsm.QueueExtend
	Settler       = fsm.Settler
	QueueRedrive  = fsm.QueueRedrive
	QueuePurge    = fsm.QueuePurge
	QueueDelete   = fsm.QueueDelete
	QueueInfo     = fsm.QueueInfo
	Delivery      = fsm.Delivery
	DeadLetter    = fsm.DeadLetter
)

// The dead-letter modes and the state's limits, for the API edge.
const (
	DeadLetterSkip  = fsm.DeadLetterSkip
	DeadLetterBlock = fsm.DeadLetterBlock
	MaxQueueBatch   = fsm.MaxQueueBatch
	MaxQueueBody    = fsm.MaxQueueBody
)

// DefaultQueueSettings are what a queue created without settings gets.
func DefaultQueueSettings() QueueSettings { return fsm.DefaultQueueSettings() }

// MaxQueueWait bounds how long a Receive long-polls.
const MaxQueueWait = 20 * time.Second

// QueueCommand proposes one queue command that needs no waiting: Create,
// Send, Ack, Nack, Extend, Redrive, Purge, Delete.
func (s *Service) QueueCommand(ctx context.Context, cmd fsm.Command) (Result, error) {
	return s.node.Propose(ctx, cmd)
}

// QueueCommands proposes cmds in one log entry and answers each result.
func (s *Service) QueueCommands(ctx context.Context, cmds []fsm.Command) ([]Result, error) {
	return s.node.ProposeAll(ctx, cmds)
}

// QueueReceive proposes cmd once a message of its queue is ready, waiting
// up to wait for one; it answers no deliveries if none was ready by then.
// It commits at most one log entry, and none when it answers empty
// without having found a message ready: while nothing is ready it waits on
// the node's queue bell (rung by every applied entry that leaves the
// queue with a message ready) and on a timer for the next delayed
// message, never polling the log. A Receive that loses a message to a
// concurrent one therefore answers empty before its wait is up; its
// caller receives again. On a node that does not lead, it proposes at
// once, so that the request goes to the leader (and waits there); so does
// a retry whose first attempt's deliveries are in flight, to be answered
// with them.
func (s *Service) QueueReceive(ctx context.Context, cmd *QueueReceive, wait time.Duration) (Result, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		bell := s.node.QueueReady(cmd.Queue) // before the read: a send after it rings
		var exists, ready, retry bool
		var at time.Time
		s.node.ReadLocal(func(st *fsm.State) {
			_, exists = st.Queue(cmd.Queue)
			at, ready = st.NextReady(cmd.Queue)
			retry = st.HasReceipt(cmd.Queue, cmd.Caller, cmd.RequestID)
		})
		now := time.Now()
		if !exists || !s.node.IsLeader() || retry || (ready && !at.After(now)) {
			return s.node.Propose(ctx, cmd)
		}
		if wait <= 0 {
			// Nothing to hand out: an empty answer costs no entry. (An
			// empty answer is never wrong: a message sent meanwhile could
			// as well have gone to another consumer.)
			return Result{Answer: &fsm.QueueResult{}}, nil
		}
		if done, err := s.awaitReady(ctx, bell, deadline.C, at, ready); done {
			return Result{Answer: &fsm.QueueResult{}}, err // nothing came: an empty answer
		}
	}
}

// awaitReady waits for the bell or, if a delayed message is next, until
// its time (at); done is true when the wait is over (deadline or ctx).
func (s *Service) awaitReady(ctx context.Context, bell <-chan struct{}, deadline <-chan time.Time, at time.Time, delayed bool) (done bool, err error) {
	var later <-chan time.Time
	if delayed {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		later = t.C
	}
	select {
	case <-ctx.Done():
		return true, ctx.Err()
	case <-s.stopping.Done():
		return true, s.stopping.Err()
	case <-deadline:
		return true, nil
	case <-bell:
	case <-later:
	}
	return false, nil
}

// QueueGet reads a queue's settings and counts, and up to inFlight of its
// deliveries in flight (oldest message first).
func (s *Service) QueueGet(ctx context.Context, name string, inFlight int) (QueueInfo, []Delivery, bool, error) {
	var info QueueInfo
	var ds []Delivery
	var ok bool
	err := s.node.Read(ctx, func(st *fsm.State) {
		if info, ok = st.Queue(name); ok {
			ds = st.InFlight(name, inFlight)
		}
	})
	return info, ds, ok, err
}

// QueueList reads up to limit queues whose names start with prefix and
// come after after, in name order.
func (s *Service) QueueList(ctx context.Context, prefix, after string, limit int) ([]QueueInfo, error) {
	var out []QueueInfo
	err := s.node.Read(ctx, func(st *fsm.State) {
		for _, name := range st.Queues() {
			if len(out) == limit {
				break
			}
			if name > after && len(name) >= len(prefix) && name[:len(prefix)] == prefix {
				info, _ := st.Queue(name)
				out = append(out, info)
			}
		}
	})
	return out, err
}

// QueueDeadLetters reads up to limit of a queue's dead letters, oldest
// first; ok is false if the queue does not exist.
func (s *Service) QueueDeadLetters(ctx context.Context, name string, limit int) ([]DeadLetter, bool, error) {
	var out []DeadLetter
	var ok bool
	err := s.node.Read(ctx, func(st *fsm.State) {
		if _, ok = st.Queue(name); ok {
			out = st.DeadLetters(name, limit)
			for i := range out { // the state's bodies are shared: copy them out of the lock
				out[i].Body = append([]byte(nil), out[i].Body...)
			}
		}
	})
	return out, ok, err
}
