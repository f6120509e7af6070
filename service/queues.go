package service

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// Keyed queues on a node: each request is built into its command here,
// the caller's identity in it (a consumer is the caller and a consumer
// name; a Send's request ID becomes its messages' dedup ids); Receive
// long-polls, and the reads verify leadership first.

// QueueCreateRequest makes a queue, or finds it as it is if one of that
// name exists with the same settings (zero fields take the defaults).
type QueueCreateRequest struct {
	Queue     string
	Settings  leasehold.QueueSettings
	RequestID string
}

// QueueCreated says whether the queue was there already, and whether the
// answer is a retry's (Dup).
type QueueCreated struct {
	Existed, Dup bool
}

// QueueSendRequest enqueues Messages in order, all or none. A RequestID
// makes a retry enqueue nothing new: it becomes the dedup id of each
// message that has none, scoped to the caller.
type QueueSendRequest struct {
	Queue     string
	Messages  []leasehold.Message
	RequestID string
}

// QueueReceiveRequest hands out up to Max messages, at most one per key,
// each visible to this consumer alone for Visibility (0: the queue's
// default). Consumer is the consumer's name among the caller's (no "/").
// With a RequestID a retry answers the first's deliveries. It waits up to
// Wait for a message when none is ready.
type QueueReceiveRequest struct {
	Queue      string
	Max        int
	Visibility time.Duration
	Wait       time.Duration
	Consumer   string
	RequestID  string
}

// Received is a Receive's deliveries (none: nothing was ready), and
// whether they answer a retry (Dup).
type Received struct {
	Deliveries []leasehold.Delivery
	Dup        bool
}

// QueueAckRequest removes the delivered message Sequence, whose delivery
// is Token; Consumer is the name its Receive gave (only that consumer of
// the caller may settle it).
type QueueAckRequest struct {
	Queue     string
	Sequence  uint64
	Token     uint64
	Consumer  string
	RequestID string
}

// Acked is an ack's answer: when the acked message was sent (zero for a
// retry answered from the dedup window). Err is one ack's refusal in an
// AckBatch; a lone Ack returns it as its error.
type Acked struct {
	SentAt time.Time
	Err    error
}

// QueueNackRequest returns a delivered message to the head of its key,
// to be delivered again no sooner than Delay; Note is kept as its last
// error.
type QueueNackRequest struct {
	Queue     string
	Sequence  uint64
	Token     uint64
	Consumer  string
	Delay     time.Duration
	Note      string
	RequestID string
}

// QueueExtendRequest gives a delivery Visibility more from now on the
// leader; Progress is the consumer's note.
type QueueExtendRequest struct {
	Queue      string
	Sequence   uint64
	Token      uint64
	Consumer   string
	Visibility time.Duration
	Progress   string
}

// QueueRedriveRequest moves up to Max dead letters (0: all) back to their
// keys, on the caller's word.
type QueueRedriveRequest struct {
	Queue     string
	Max       int
	RequestID string
}

// QueuePurgeRequest drops every message of a queue that is not in flight,
// and its dead letters, on the caller's word and Reason (audited).
type QueuePurgeRequest struct {
	Queue     string
	Reason    string
	RequestID string
}

// QueueDeleteRequest drops a queue and everything in it, on the caller's
// word and Reason (audited).
type QueueDeleteRequest struct {
	Queue     string
	Reason    string
	RequestID string
}

// QueueMoved is a Redrive's or a Purge's answer: the messages moved or
// dropped, and whether it answers a retry (Dup).
type QueueMoved struct {
	Moved int
	Dup   bool
}

// consumerID names a consumer: the caller and the consumer name (which
// the API front checked holds no "/"), so that no caller can pass for
// another's consumer.
func consumerID(caller, name string) string {
	if caller == "" {
		return name
	}
	return caller + "/" + name
}

// settler is who settles a delivery: the caller's consumer name.
func settler(ctx context.Context, name string) fsm.Settler {
	return fsm.Settler{Consumer: consumerID(CallerOf(ctx).Name, name), Bound: true}
}

// queue proposes one queue command that needs no waiting; the state
// machine's refusal is the error.
func (s *Service) queue(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	res, err := s.node.Propose(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	if res.Queue() == nil {
		res.Answer = &fsm.QueueResult{}
	}
	return res, err
}

// QueueCreate makes a queue (see QueueCreateRequest).
func (s *Service) QueueCreate(ctx context.Context, req *QueueCreateRequest) (QueueCreated, error) {
	res, err := s.queue(ctx, &fsm.QueueCreate{Queue: req.Queue, Settings: req.Settings, Caller: CallerOf(ctx).Actor,
		RequestID: req.RequestID})
	return QueueCreated{Existed: res.Queue().Existed, Dup: res.Dup}, err
}

// QueueSend enqueues a request's messages and answers each one's sequence.
func (s *Service) QueueSend(ctx context.Context, req *QueueSendRequest) ([]leasehold.Sent, error) {
	caller := CallerOf(ctx).Name
	cmd := &fsm.QueueSend{Queue: req.Queue, Messages: req.Messages, Caller: caller}
	if req.RequestID != "" {
		cmd.Messages = make([]leasehold.Message, len(req.Messages))
		for i, m := range req.Messages {
			if m.DedupID == "" {
				m.DedupID = requestDedupID(caller, req.RequestID, i, len(req.Messages), m)
			}
			cmd.Messages[i] = m
		}
	}
	res, err := s.queue(ctx, cmd)
	if err != nil {
		return nil, err
	}
	out := make([]leasehold.Sent, len(res.Queue().Seqs))
	for i, seq := range res.Queue().Seqs {
		out[i] = leasehold.Sent{Sequence: seq, Duplicate: res.Queue().Duplicate[i]}
	}
	return out, nil
}

// requestDedupID turns a Send's request ID into the dedup id of its
// message i of n, scoped to the caller: a retry of the same request
// enqueues nothing within the queue's dedup window. It starts with a zero
// byte, which a caller's dedup id (printable) never has. After the
// request's part comes the message's fingerprint (n, key, body, delay),
// so that the state machine refuses the request ID reused for another
// message instead of answering it as a duplicate (fsm.RequestDedupPart).
func requestDedupID(caller, requestID string, i, n int, m leasehold.Message) string {
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(caller))))
	h.Write([]byte(caller))
	h.Write(binary.AppendUvarint(nil, uint64(i)))
	h.Write([]byte(requestID))
	f := sha256.New()
	f.Write(binary.AppendUvarint(nil, uint64(n)))
	f.Write(binary.AppendUvarint(nil, uint64(len(m.Key))))
	f.Write([]byte(m.Key))
	f.Write(binary.AppendVarint(nil, int64(m.Delay)))
	f.Write(m.Body)
	return "\x00" + hex.EncodeToString(h.Sum(nil)[:16]) + ":" + hex.EncodeToString(f.Sum(nil)[:8])
}

func (req *QueueAckRequest) command(ctx context.Context) *fsm.QueueAck {
	return &fsm.QueueAck{RequestID: req.RequestID, Queue: req.Queue, Seq: req.Sequence, Token: req.Token,
		Caller: CallerOf(ctx).Name, Settler: settler(ctx, req.Consumer)}
}

// QueueAck removes a delivered message.
func (s *Service) QueueAck(ctx context.Context, req *QueueAckRequest) (Acked, error) {
	res, err := s.queue(ctx, req.command(ctx))
	return Acked{SentAt: res.Queue().SentAt}, err
}

// QueueAckBatch acks reqs in one log entry, each answered on its own.
func (s *Service) QueueAckBatch(ctx context.Context, reqs []*QueueAckRequest) ([]Acked, error) {
	cmds := make([]fsm.Command, len(reqs))
	for i, r := range reqs {
		cmds[i] = r.command(ctx)
	}
	res, err := s.node.ProposeAll(ctx, cmds)
	if err != nil {
		return nil, err // not the leader, or no quorum: nothing was acked
	}
	out := make([]Acked, len(res))
	for i, r := range res {
		out[i].Err = r.Err
		if r.Err == nil && r.Queue() != nil {
			out[i].SentAt = r.Queue().SentAt
		}
	}
	return out, nil
}

// QueueNack returns a delivered message to its key's head.
func (s *Service) QueueNack(ctx context.Context, req *QueueNackRequest) error {
	_, err := s.queue(ctx, &fsm.QueueNack{Queue: req.Queue, Seq: req.Sequence, Token: req.Token, Delay: req.Delay,
		Note: req.Note, Settler: settler(ctx, req.Consumer), RequestID: req.RequestID})
	return err
}

// QueueExtend restarts a delivery's visibility.
func (s *Service) QueueExtend(ctx context.Context, req *QueueExtendRequest) error {
	_, err := s.queue(ctx, &fsm.QueueExtend{Queue: req.Queue, Seq: req.Sequence, Token: req.Token,
		Visibility: req.Visibility, Progress: req.Progress, Settler: settler(ctx, req.Consumer)})
	return err
}

// QueueRedrive moves dead letters back to their keys.
func (s *Service) QueueRedrive(ctx context.Context, req *QueueRedriveRequest) (QueueMoved, error) {
	res, err := s.queue(ctx, &fsm.QueueRedrive{Queue: req.Queue, Max: req.Max, Actor: CallerOf(ctx).Actor,
		RequestID: req.RequestID})
	return QueueMoved{Moved: res.Queue().Moved, Dup: res.Dup}, err
}

// QueuePurge drops a queue's messages that are not in flight.
func (s *Service) QueuePurge(ctx context.Context, req *QueuePurgeRequest) (QueueMoved, error) {
	res, err := s.queue(ctx, &fsm.QueuePurge{Queue: req.Queue, Actor: CallerOf(ctx).Actor, Reason: req.Reason,
		RequestID: req.RequestID})
	return QueueMoved{Moved: res.Queue().Moved, Dup: res.Dup}, err
}

// QueueDelete drops a queue.
func (s *Service) QueueDelete(ctx context.Context, req *QueueDeleteRequest) error {
	_, err := s.queue(ctx, &fsm.QueueDelete{Queue: req.Queue, Actor: CallerOf(ctx).Actor, Reason: req.Reason,
		RequestID: req.RequestID})
	return err
}

// QueueReceive proposes req's Receive once a message of its queue is
// ready, waiting up to req.Wait for one; it answers no deliveries if none
// was ready by then. It commits at most one log entry, and none when it answers empty
// without having found a message ready: while nothing is ready it waits on
// the node's queue bell (rung by every applied entry that leaves the
// queue with a message ready) and on a timer for the next delayed
// message, never polling the log. A Receive that loses a message to a
// concurrent one therefore answers empty before its wait is up; its
// caller receives again. On a node that does not lead, it proposes at
// once, so that the request goes to the leader (and waits there); so does
// a retry whose first attempt's deliveries are in flight, to be answered
// with them.
func (s *Service) QueueReceive(ctx context.Context, req *QueueReceiveRequest) (Received, error) {
	cmd := &fsm.QueueReceive{Queue: req.Queue, Max: req.Max, Visibility: req.Visibility,
		Caller: consumerID(CallerOf(ctx).Name, req.Consumer), RequestID: req.RequestID}
	res, err := s.receive(ctx, cmd, req.Wait)
	if err == nil {
		err = res.Err
	}
	var out Received
	if res.Queue() != nil {
		out.Deliveries = res.Queue().Deliveries
	}
	out.Dup = res.Dup
	return out, err
}

func (s *Service) receive(ctx context.Context, cmd *fsm.QueueReceive, wait time.Duration) (fsm.Result, error) {
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
			return fsm.Result{Answer: &fsm.QueueResult{}}, nil
		}
		if done, err := s.awaitReady(ctx, bell, deadline.C, at, ready); done {
			return fsm.Result{Answer: &fsm.QueueResult{}}, err // nothing came: an empty answer
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
func (s *Service) QueueGet(ctx context.Context, name string, inFlight int) (leasehold.QueueInfo, []leasehold.Delivery, bool, error) {
	var info leasehold.QueueInfo
	var ds []leasehold.Delivery
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
func (s *Service) QueueList(ctx context.Context, prefix, after string, limit int) ([]leasehold.QueueInfo, error) {
	var out []leasehold.QueueInfo
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
func (s *Service) QueueDeadLetters(ctx context.Context, name string, limit int) ([]leasehold.DeadLetter, bool, error) {
	var out []leasehold.DeadLetter
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
