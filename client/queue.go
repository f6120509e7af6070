package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
)

// Keyed queues: messages of one key are delivered in send order, at most
// one in flight at a time, each delivery with a fencing token. package
// queue (queue.Consume) runs handlers on them; these are the calls.

func queuesOf(e *endpoint) leaseholdv1connect.QueuesClient { return e.queues }

// ReceiveOption adjusts one Receive.
type ReceiveOption func(*receiveOptions)

type receiveOptions struct {
	visibility, wait time.Duration
	consumer         string
}

// VisibilityTimeout is how long the deliveries stay invisible to other
// consumers (1s to 12h; default the queue's).
func VisibilityTimeout(d time.Duration) ReceiveOption {
	return func(o *receiveOptions) { o.visibility = d }
}

// PollWait long-polls: if nothing is ready, Receive waits up to d (at
// most 20s) for a message before answering empty.
func PollWait(d time.Duration) ReceiveOption { return func(o *receiveOptions) { o.wait = d } }

// ConsumerName names this consumer among the caller's: the server counts
// its deliveries in flight against the queue's max_in_flight_per_consumer.
func ConsumerName(name string) ReceiveOption { return func(o *receiveOptions) { o.consumer = name } }

// CreateQueue makes a queue with settings (zero fields: the defaults). A
// queue that exists with the same settings is answered as it is; with
// other settings the error matches leasehold.ErrHeld. A retry after a lost
// reply carries the same request ID, so it is answered as the first was.
func (c *Client) CreateQueue(ctx context.Context, name string, s QueueSettings) (QueueInfo, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf, leaseholdv1connect.QueuesClient.Create,
		&pb.QueuesCreateRequest{Queue: name, Settings: queueSettingsWire(s), RequestId: randomHex(16)})
	if err != nil {
		return QueueInfo{}, err
	}
	return queueInfo(r.Queue), nil
}

// Queue shows one queue: settings, counts, the age of its oldest message
// and up to inFlight of its deliveries in flight, oldest first (the
// slowest keys; 0: the server's default of 20). A missing queue is an
// error matching leasehold.ErrNotFound.
func (c *Client) Queue(ctx context.Context, name string, inFlight int) (QueueInfo, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf, leaseholdv1connect.QueuesClient.Get,
		&pb.QueuesGetRequest{Queue: name, InFlightLimit: uint32(inFlight)})
	if err != nil {
		return QueueInfo{}, err
	}
	info := queueInfo(r.Queue)
	for _, d := range r.InFlight {
		info.InFlightKeys = append(info.InFlightKeys, InFlightKey{Key: d.Key, Sequence: d.Sequence, Token: d.Token,
			Receives: int(d.Receives), Consumer: d.Consumer, SentAt: stamp(d.SentAt), Visibility: dur(d.Visibility)})
	}
	return info, nil
}

// Queues lists every queue whose name starts with prefix, by name.
func (c *Client) Queues(ctx context.Context, prefix string) ([]QueueInfo, error) {
	var out []QueueInfo
	after := ""
	for {
		r, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf, leaseholdv1connect.QueuesClient.List,
			&pb.QueuesListRequest{Prefix: prefix, After: after, Limit: leasehold.MaxListLimit})
		if err != nil {
			return nil, err
		}
		out = append(out, convertAll(r.Queues, queueInfo)...)
		if len(r.Queues) < leasehold.MaxListLimit {
			return out, nil
		}
		after = r.Queues[len(r.Queues)-1].Name
	}
}

// PurgeQueue drops every message of the queue that is not in flight, and
// its dead letters, and returns how many (admin; reason goes to the audit
// log). A retry after a lost reply carries the same request ID, so it
// drops nothing sent since the first attempt and answers its count.
func (c *Client) PurgeQueue(ctx context.Context, name, reason string) (int, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf, leaseholdv1connect.QueuesClient.Purge,
		&pb.QueuesPurgeRequest{Queue: name, Reason: reason, RequestId: randomHex(16)})
	if err != nil {
		return 0, err
	}
	return int(r.Dropped), nil
}

// DeleteQueue drops the queue and everything in it (admin; reason goes to
// the audit log). A retry after a lost reply is answered as the first was,
// not as not found.
func (c *Client) DeleteQueue(ctx context.Context, name, reason string) error {
	_, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf, leaseholdv1connect.QueuesClient.Delete,
		&pb.QueuesDeleteRequest{Queue: name, Reason: reason, RequestId: randomHex(16)})
	return err
}

// Send enqueues m and returns its sequence number once committed. A retry
// after a lost reply carries the same request ID, so it never enqueues
// twice. A full queue is refused with a *RetryAfterError.
func (c *Client) Send(ctx context.Context, queue string, m leasehold.Message) (leasehold.Sent, error) {
	req := &pb.QueuesSendRequest{Queue: queue, Key: m.Key, Body: m.Body, DedupId: m.DedupID, RequestId: randomHex(16)}
	if m.Delay > 0 {
		req.Delay = durationpb.New(m.Delay)
	}
	var hint time.Duration
	r, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf,
		func(s leaseholdv1connect.QueuesClient, ctx context.Context, req *connect.Request[pb.QueuesSendRequest]) (*connect.Response[pb.QueuesSendResponse], error) {
			resp, err := s.Send(ctx, req)
			hint = retryAfterOf(err)
			return resp, err
		}, req)
	if err != nil {
		return leasehold.Sent{}, backpressure(err, hint)
	}
	return leasehold.Sent{Sequence: r.Sequence, Duplicate: r.Duplicate}, nil
}

// SendBatch enqueues 1 to 100 messages in one commit, all or none, and
// returns one answer per message, in order. Like Send, a retry never
// enqueues twice, and a full queue is refused with a *RetryAfterError.
func (c *Client) SendBatch(ctx context.Context, queue string, ms []leasehold.Message) ([]leasehold.Sent, error) {
	req := &pb.QueuesSendBatchRequest{Queue: queue, RequestId: randomHex(16), Messages: make([]*pb.QueueMessage, len(ms))}
	for i, m := range ms {
		req.Messages[i] = &pb.QueueMessage{Key: m.Key, Body: m.Body, DedupId: m.DedupID}
		if m.Delay > 0 {
			req.Messages[i].Delay = durationpb.New(m.Delay)
		}
	}
	var hint time.Duration
	r, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf,
		func(s leaseholdv1connect.QueuesClient, ctx context.Context, req *connect.Request[pb.QueuesSendBatchRequest]) (*connect.Response[pb.QueuesSendBatchResponse], error) {
			resp, err := s.SendBatch(ctx, req)
			hint = retryAfterOf(err)
			return resp, err
		}, req)
	if err != nil {
		return nil, backpressure(err, hint)
	}
	return convertAll(r.Results, func(s *pb.QueuesSendResponse) leasehold.Sent {
		return leasehold.Sent{Sequence: s.Sequence, Duplicate: s.Duplicate}
	}), nil
}

// retryAfterOf reads the QueueRetryAfter detail of a refused send.
func retryAfterOf(err error) time.Duration {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return 0
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if ra, ok := v.(*pb.QueueRetryAfter); ok {
				return dur(ra.RetryAfter)
			}
		}
	}
	return 0
}

// Receive hands out up to max (1 to 100) messages of distinct keys, each
// key's in send order. With PollWait it waits for one if none is ready,
// and answers empty if none came. Each Receive carries a request ID, and
// one retried after a lost reply is answered with the lost reply's
// deliveries (the same tokens), not with other messages.
func (c *Client) Receive(ctx context.Context, queue string, max int, opts ...ReceiveOption) ([]leasehold.Delivery, error) {
	var o receiveOptions
	for _, f := range opts {
		f(&o)
	}
	req := &pb.QueuesReceiveRequest{Queue: queue, Max: uint32(max), Consumer: o.consumer, RequestId: randomHex(16)}
	if o.visibility > 0 {
		req.Visibility = durationpb.New(o.visibility)
	}
	if o.wait > 0 {
		req.Wait = durationpb.New(o.wait)
	}
	perTry := c.cfg.RequestTimeout + o.wait
	ctx, stop := c.bound(ctx, o.wait)
	defer stop()
	// The clock starts before the send: the deliveries cannot be older.
	sent := time.Now()
	r, err := call(ctx, c, perTry, queuesOf, leaseholdv1connect.QueuesClient.Receive, req)
	if err != nil {
		return nil, err
	}
	out := make([]leasehold.Delivery, len(r.Deliveries))
	for i, d := range r.Deliveries {
		out[i] = leasehold.Delivery{Queue: d.Queue, Key: d.Key, Consumer: o.consumer, Sequence: d.Sequence, Token: d.Token, Receives: int(d.Receives),
			Body: d.Body, SentAt: stamp(d.SentAt), Visibility: dur(d.Visibility), Deadline: c.safeExpiry(sent, dur(d.Visibility))}
	}
	return out, nil
}

// Ack removes a delivered message. d needs only Queue, Sequence, Token
// and Consumer. A delivery that is no longer this consumer's (its
// visibility ran out and the message was delivered again, or it was
// nacked) is refused with an error matching leasehold.ErrStaleToken; one
// delivered to another consumer (another caller, or another consumer
// name) with an error matching leasehold.ErrPermission. A retry after a
// lost reply is answered as the first attempt was.
func (c *Client) Ack(ctx context.Context, d leasehold.Delivery) error {
	_, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf, leaseholdv1connect.QueuesClient.Ack,
		&pb.QueuesAckRequest{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token, RequestId: randomHex(16), Consumer: d.Consumer})
	return err
}

// AckBatch acks up to 100 deliveries of one queue and one consumer (the
// same Queue and Consumer) in one commit. Each is answered on its own: the
// error at i is nil when ds[i] was acked, else why not, as Ack would say
// (a stale token, another consumer's delivery). err is for the call as a
// whole (bad input, no leader within ctx): then nothing is known to be
// acked. A retry after a lost reply carries the same request IDs and is
// answered as the first attempt was.
func (c *Client) AckBatch(ctx context.Context, ds []leasehold.Delivery) (errs []error, err error) {
	if len(ds) == 0 || len(ds) > leasehold.MaxQueueBatch {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "ack 1 to %d deliveries at once, not %d", leasehold.MaxQueueBatch, len(ds))
	}
	req := &pb.QueuesAckBatchRequest{Queue: ds[0].Queue, Consumer: ds[0].Consumer, Acks: make([]*pb.QueueAck, len(ds))}
	for i, d := range ds {
		if d.Queue != req.Queue || d.Consumer != req.Consumer {
			return nil, leasehold.Errorf(leasehold.CodeInvalid,
				"AckBatch takes deliveries of one queue and one consumer: ds[%d] is of %q/%q, ds[0] of %q/%q", i, d.Queue, d.Consumer, req.Queue, req.Consumer)
		}
		req.Acks[i] = &pb.QueueAck{Sequence: d.Sequence, Token: d.Token, RequestId: randomHex(16)}
	}
	r, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf, leaseholdv1connect.QueuesClient.AckBatch, req)
	if err != nil {
		return nil, err
	}
	if len(r.Results) != len(ds) {
		return nil, fmt.Errorf("leasehold: AckBatch answered %d results for %d acks", len(r.Results), len(ds))
	}
	errs = make([]error, len(ds))
	for i, res := range r.Results {
		if e := res.GetError(); e != nil {
			errs[i] = api.FromBatchError(e)
		}
	}
	return errs, nil
}

// Nack returns a delivered message to the head of its key, deliverable
// again after delay (0 to 15m), keeping note (up to 1 KiB) as its last
// error. A stale delivery, or another consumer's, is refused as for Ack;
// a retry after a lost reply is answered as the first was.
func (c *Client) Nack(ctx context.Context, d leasehold.Delivery, delay time.Duration, note string) error {
	_, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf, leaseholdv1connect.QueuesClient.Nack,
		&pb.QueuesNackRequest{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token, Delay: durationpb.New(delay), Error: note,
			Consumer: d.Consumer, RequestId: randomHex(16)})
	return err
}

// Extend keeps a delivery invisible to others for visibility more from
// now, with a progress note, and returns its new local safe deadline. A
// stale delivery, or another consumer's, is refused as for Ack.
func (c *Client) Extend(ctx context.Context, d leasehold.Delivery, visibility time.Duration, progress string) (time.Time, error) {
	sent := time.Now()
	_, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf, leaseholdv1connect.QueuesClient.Extend,
		&pb.QueuesExtendRequest{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token,
			Visibility: durationpb.New(visibility), Progress: progress, Consumer: d.Consumer})
	if err != nil {
		return time.Time{}, err
	}
	return c.safeExpiry(sent, visibility), nil
}

// Redrive moves up to max (0: all) dead letters back to their keys,
// oldest first, and returns how many moved (admin). A retry after a lost
// reply moves nothing more and answers the first's count.
func (c *Client) Redrive(ctx context.Context, queue string, max int) (int, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf, leaseholdv1connect.QueuesClient.Redrive,
		&pb.QueuesRedriveRequest{Queue: queue, Max: uint32(max), RequestId: randomHex(16)})
	if err != nil {
		return 0, err
	}
	return int(r.Moved), nil
}

// DeadLetters lists up to limit (0: the server's default of 100) of the
// queue's dead letters, oldest first.
func (c *Client) DeadLetters(ctx context.Context, queue string, limit int) ([]leasehold.DeadLetter, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, queuesOf, leaseholdv1connect.QueuesClient.DeadLetters,
		&pb.QueuesDeadLettersRequest{Queue: queue, Limit: uint32(limit)})
	if err != nil {
		return nil, err
	}
	return convertAll(r.DeadLetters, func(d *pb.QueueDeadLetter) leasehold.DeadLetter {
		return leasehold.DeadLetter{Sequence: d.Sequence, Key: d.Key, Body: d.Body, SentAt: stamp(d.SentAt),
			Receives: int(d.Receives), Note: d.Note, DiedAt: stamp(d.DiedAt)}
	}), nil
}

func queueSettingsWire(s QueueSettings) *pb.QueueSettings {
	out := &pb.QueueSettings{MaxReceives: uint32(s.MaxReceives), MaxDepth: uint64(s.MaxDepth), MaxBytes: uint64(s.MaxBytes),
		MaxInFlightPerConsumer: uint32(s.MaxInFlightPerConsumer)}
	if s.Visibility > 0 {
		out.Visibility = durationpb.New(s.Visibility)
	}
	if s.Retention > 0 {
		out.Retention = durationpb.New(s.Retention)
	}
	if s.DedupWindow > 0 {
		out.DedupWindow = durationpb.New(s.DedupWindow)
	}
	switch s.DeadLetter {
	case DeadLetterSkip:
		out.DeadLetter = pb.DeadLetterMode_DEAD_LETTER_MODE_SKIP
	case DeadLetterBlock:
		out.DeadLetter = pb.DeadLetterMode_DEAD_LETTER_MODE_BLOCK
	}
	return out
}

func queueInfo(q *pb.QueueInfo) QueueInfo {
	s := q.GetSettings()
	mode := DeadLetterSkip
	if s.GetDeadLetter() == pb.DeadLetterMode_DEAD_LETTER_MODE_BLOCK {
		mode = DeadLetterBlock
	}
	return QueueInfo{Name: q.GetName(), CreatedAt: stamp(q.GetCreatedAt()), Depth: int(q.GetDepth()),
		InFlight: int(q.GetInFlight()), Dead: int(q.GetDead()), Bytes: int(q.GetBytes()), Keys: int(q.GetKeys()),
		OldestAge: dur(q.GetOldestAge()),
		Settings: QueueSettings{Visibility: dur(s.GetVisibility()), MaxReceives: int(s.GetMaxReceives()),
			Retention: dur(s.GetRetention()), MaxDepth: int(s.GetMaxDepth()), MaxBytes: int(s.GetMaxBytes()),
			MaxInFlightPerConsumer: int(s.GetMaxInFlightPerConsumer()), DedupWindow: dur(s.GetDedupWindow()),
			DeadLetter: mode}}
}
