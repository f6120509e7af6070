package fsm

import (
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// The commands of keyed queues (queue.go). Sends and acks carry their
// caller, stamped by the node; an Ack also carries a request ID, so a
// retried Ack is answered from the dedup window instead of as stale. A
// Send needs no request ID: its dedup id is what makes a retry safe.

const (
	KindQueueCreate  Kind = 30
	KindQueueSend    Kind = 31 // one message or a batch of up to MaxQueueBatch
	KindQueueReceive Kind = 32
	KindQueueAck     Kind = 33
	KindQueueNack    Kind = 34
	KindQueueExtend  Kind = 35
	KindQueueExpire  Kind = 36 // a delivery's visibility ran out on the leader
	KindQueueRedrive Kind = 37
	KindQueuePurge   Kind = 38
	KindQueueDelete  Kind = 39
	KindQueueRetire  Kind = 40 // messages past the queue's retention are dropped

	// An Ack, Nack or Extend bound to its consumer (Bound): the old
	// kind's encoding followed by the consumer. Entries of kinds 33–35,
	// written before deliveries were bound, are applied as they were.
	KindQueueAckBy    Kind = 70
	KindQueueNackBy   Kind = 71
	KindQueueExtendBy Kind = 72
	// A Receive with a request ID (queue_receipts.go): the old kind's
	// encoding followed by the ID.
	KindQueueReceiveID Kind = 73
	// A Create, bound Nack, Redrive, Purge or Delete with a request ID
	// (queue_retries.go): the old kind's encoding followed by the ID.
	KindQueueCreateID  Kind = 74
	KindQueueNackID    Kind = 75
	KindQueueRedriveID Kind = 76
	KindQueuePurgeID   Kind = 77
	KindQueueDeleteID  Kind = 78
)

// QueueCreate makes a queue, or is answered with the queue as it is if
// one of that name exists with the same settings.
type QueueCreate struct {
	Queue     string
	Settings  QueueSettings
	Caller    string
	RequestID string // see queue_retries.go
}

// QueueMessage is one message of a Send (leasehold.Message): its Body is
// kept by the state as is (never reuse it after Apply), an empty DedupID
// deduplicates nothing, and it is not deliverable before the send's time
// + Delay.
type QueueMessage = leasehold.Message

// QueueSend enqueues Messages, in order, all or none.
type QueueSend struct {
	Queue    string
	Messages []QueueMessage
	Caller   string
}

// QueueReceive hands out up to Max messages, at most one per key. With a
// RequestID, a retry answers the first's deliveries (queue_receipts.go).
type QueueReceive struct {
	Queue      string
	Max        int
	Visibility time.Duration // 0: the queue's default
	Caller     string        // the consumer: caller + "/" + consumer name
	RequestID  string
}

// QueueAck removes a delivered message. Seq and Token name the delivery.
type QueueAck struct {
	RequestID string
	Queue     string
	Seq       uint64
	Token     uint64
	Caller    string
	Settler
}

// Settler names who acks, nacks or extends a delivery. When Bound, the
// delivery must be Consumer's (its Receive's consumer: the authenticated
// caller + "/" + consumer name), or the command is refused with
// CodePermission: a delivery token is a small increasing number, and
// knowing one must not let another consumer settle the delivery. A node
// always proposes Bound commands; only entries of the old kinds, written
// before deliveries were bound, decode unbound.
type Settler struct {
	Consumer string
	Bound    bool
}

// check refuses a bound command for a delivery that is not its consumer's.
func (b Settler) check(name string, m *qmsg) error {
	if !b.Bound || b.Consumer == m.consumer {
		return nil
	}
	return leasehold.Errorf(leasehold.CodePermission,
		"delivery %d of queue %q is in flight to another consumer: only the consumer that received it "+
			"(the same caller and consumer name) may ack, nack or extend it", m.seq, name)
}

// kind is old for an unbound command, else bound.
func (b Settler) kind(old, bound Kind) Kind {
	if b.Bound {
		return bound
	}
	return old
}

func (b Settler) encode(e *encoder) {
	if b.Bound {
		e.str(b.Consumer)
	}
}

// decode reads the consumer of a bound kind: the registry makes those
// commands with Bound set.
func (b *Settler) decode(d *decoder) {
	if b.Bound {
		b.Consumer = d.str()
	}
}

// QueueNack returns a delivered message to the head of its key, to be
// delivered again no sooner than Delay; Note is kept as its last error.
type QueueNack struct {
	Queue string
	Seq   uint64
	Token uint64
	Delay time.Duration
	Note  string
	Settler
	RequestID string // see queue_retries.go; only on a bound Nack
}

// QueueExtend gives a delivery Visibility more from now on the leader.
type QueueExtend struct {
	Queue      string
	Seq        uint64
	Token      uint64
	Visibility time.Duration
	Progress   string
	Settler
}

// QueueExpire ends a delivery whose visibility ran out. Token names the
// delivery the leader timed, so a stale one (the message was acked,
// nacked or extended and redelivered since) does nothing.
type QueueExpire struct {
	Queue string
	Seq   uint64
	Token uint64
}

// QueueRedrive moves up to Max dead letters (0: all) back to their keys.
type QueueRedrive struct {
	Queue     string
	Max       int
	Actor     string
	RequestID string // see queue_retries.go
}

// QueuePurge drops every message of a queue that is not in flight, and
// its dead letters; the settings stay.
type QueuePurge struct {
	Queue     string
	Actor     string
	Reason    string
	RequestID string // see queue_retries.go
}

// QueueDelete drops a queue and everything in it.
type QueueDelete struct {
	Queue     string
	Actor     string
	Reason    string
	RequestID string // see queue_retries.go
}

// QueueRetire drops the messages of a queue, queued or dead, sent before
// Before (unix nanoseconds), as its retention says, and the dedup ids past
// the queue's dedup window (by the entry's time). The leader proposes
// it now and then with Before = its wall clock - retention; retention is
// days, so clock skew between leaders matters little. A message in
// flight is kept: its consumer may be committing it.
type QueueRetire struct {
	Queue  string
	Before int64
}

func (*QueueRetire) Kind() Kind { return KindQueueRetire }
func (*QueueSend) Kind() Kind   { return KindQueueSend }

// Kind is KindQueueReceiveID for a Receive with a request ID, whose
// encoding carries it; one without encodes as it always did.
func (c *QueueReceive) Kind() Kind {
	if c.RequestID != "" {
		return KindQueueReceiveID
	}
	return KindQueueReceive
}

func (c *QueueAck) Kind() Kind    { return c.kind(KindQueueAck, KindQueueAckBy) }
func (c *QueueExtend) Kind() Kind { return c.kind(KindQueueExtend, KindQueueExtendBy) }
func (*QueueExpire) Kind() Kind   { return KindQueueExpire }

func (c *QueueRetire) apply(s *State, _ uint64, now int64) Result { return s.queues.retire(now, c) }
func (c *QueueSend) apply(s *State, _ uint64, now int64) Result   { return s.queues.send(now, c) }
func (c *QueueReceive) apply(s *State, ix uint64, now int64) Result {
	return s.queues.receive(ix, now, c)
}
func (c *QueueAck) apply(s *State, _ uint64, now int64) Result    { return s.queues.ack(now, c) }
func (c *QueueExtend) apply(s *State, _ uint64, _ int64) Result   { return s.queues.extend(c) }
func (c *QueueExpire) apply(s *State, _ uint64, now int64) Result { return s.queues.expire(now, c) }

func encodeQueueSettings(e *encoder, q *QueueSettings) {
	e.varint(int64(q.Visibility))
	e.uvarint(uint64(q.MaxReceives))
	e.varint(int64(q.Retention))
	e.uvarint(uint64(q.MaxDepth))
	e.uvarint(uint64(q.MaxBytes))
	e.uvarint(uint64(q.MaxInFlightPerConsumer))
	e.varint(int64(q.DedupWindow))
	e.byte1(byte(q.DeadLetter))
}

func decodeQueueSettings(d *decoder, q *QueueSettings) {
	q.Visibility = time.Duration(d.varint())
	q.MaxReceives = uint32(d.uvarint())
	q.Retention = time.Duration(d.varint())
	q.MaxDepth = int(d.uvarint())
	q.MaxBytes = int(d.uvarint())
	q.MaxInFlightPerConsumer = int(d.uvarint())
	q.DedupWindow = time.Duration(d.varint())
	q.DeadLetter = DeadLetterMode(d.byte1())
}

func (c *QueueCreate) encode(e *encoder) {
	e.str(c.Queue)
	encodeQueueSettings(e, &c.Settings)
	e.str(c.Caller)
	idTail(e, c.RequestID)
}

func (c *QueueCreate) decode(d *decoder) {
	c.Queue = d.str()
	decodeQueueSettings(d, &c.Settings)
	c.Caller = d.str()
}

func (c *QueueSend) encode(e *encoder) {
	e.str(c.Queue)
	e.uvarint(uint64(len(c.Messages)))
	for i := range c.Messages {
		m := &c.Messages[i]
		e.str(m.Key)
		e.str(string(m.Body))
		e.str(m.DedupID)
		e.varint(int64(m.Delay))
	}
	e.str(c.Caller)
}

func (c *QueueSend) decode(d *decoder) {
	c.Queue = d.str()
	if n := d.count(4); n > 0 {
		c.Messages = make([]QueueMessage, n)
		for i := range c.Messages {
			m := &c.Messages[i]
			m.Key = d.str()
			m.Body = []byte(d.str())
			m.DedupID = d.str()
			m.Delay = time.Duration(d.varint())
		}
	}
	c.Caller = d.str()
}

func (c *QueueReceive) encode(e *encoder) {
	e.str(c.Queue)
	e.varint(int64(c.Max))
	e.varint(int64(c.Visibility))
	e.str(c.Caller)
	if c.RequestID != "" {
		e.str(c.RequestID)
	}
}

func (c *QueueReceive) decode(d *decoder) {
	c.Queue = d.str()
	c.Max = int(d.varint())
	c.Visibility = time.Duration(d.varint())
	c.Caller = d.str()
}

func (c *QueueAck) encode(e *encoder) {
	e.str(c.RequestID)
	e.str(c.Queue)
	e.uvarint(c.Seq)
	e.uvarint(c.Token)
	e.str(c.Caller)
	c.Settler.encode(e)
}

func (c *QueueAck) decode(d *decoder) {
	c.RequestID = d.str()
	c.Queue = d.str()
	c.Seq = d.uvarint()
	c.Token = d.uvarint()
	c.Caller = d.str()
	c.Settler.decode(d)
}

func (c *QueueNack) encode(e *encoder) {
	e.str(c.Queue)
	e.uvarint(c.Seq)
	e.uvarint(c.Token)
	e.varint(int64(c.Delay))
	e.str(c.Note)
	c.Settler.encode(e)
	if c.Bound {
		idTail(e, c.RequestID)
	}
}

func (c *QueueNack) decode(d *decoder) {
	c.Queue = d.str()
	c.Seq = d.uvarint()
	c.Token = d.uvarint()
	c.Delay = time.Duration(d.varint())
	c.Note = d.str()
	c.Settler.decode(d)
}

func (c *QueueExtend) encode(e *encoder) {
	e.str(c.Queue)
	e.uvarint(c.Seq)
	e.uvarint(c.Token)
	e.varint(int64(c.Visibility))
	e.str(c.Progress)
	c.Settler.encode(e)
}

func (c *QueueExtend) decode(d *decoder) {
	c.Queue = d.str()
	c.Seq = d.uvarint()
	c.Token = d.uvarint()
	c.Visibility = time.Duration(d.varint())
	c.Progress = d.str()
	c.Settler.decode(d)
}

func (c *QueueExpire) encode(e *encoder) { e.str(c.Queue); e.uvarint(c.Seq); e.uvarint(c.Token) }
func (c *QueueExpire) decode(d *decoder) {
	c.Queue = d.str()
	c.Seq = d.uvarint()
	c.Token = d.uvarint()
}

func (c *QueueRedrive) encode(e *encoder) {
	e.str(c.Queue)
	e.varint(int64(c.Max))
	e.str(c.Actor)
	idTail(e, c.RequestID)
}
func (c *QueueRedrive) decode(d *decoder) {
	c.Queue = d.str()
	c.Max = int(d.varint())
	c.Actor = d.str()
}

func (c *QueuePurge) encode(e *encoder) {
	e.str(c.Queue)
	e.str(c.Actor)
	e.str(c.Reason)
	idTail(e, c.RequestID)
}
func (c *QueuePurge) decode(d *decoder) { c.Queue = d.str(); c.Actor = d.str(); c.Reason = d.str() }

func (c *QueueDelete) encode(e *encoder) {
	e.str(c.Queue)
	e.str(c.Actor)
	e.str(c.Reason)
	idTail(e, c.RequestID)
}
func (c *QueueDelete) decode(d *decoder) { c.Queue = d.str(); c.Actor = d.str(); c.Reason = d.str() }

func (c *QueueRetire) encode(e *encoder) { e.str(c.Queue); e.varint(c.Before) }
func (c *QueueRetire) decode(d *decoder) { c.Queue = d.str(); c.Before = d.varint() }
