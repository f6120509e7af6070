package fsm

import "math"

// Request IDs make a queue's Create, Nack, Redrive, Purge and Delete safe
// to retry. Each acts on what is there when it applies, so a retry after
// a lost answer would act again on what came since: a Purge would drop
// the messages sent between the two attempts, a Redrive move what died
// since, and a Delete, Create or Nack would answer not_found, existed or
// stale for what the first attempt did. With a request ID, a command's
// answer is kept in the dedup window (dedup.go), keyed by the ID scoped to
// its caller (the actor, or the Nack's consumer), and a retry gets it
// back instead of acting. Only successes are kept: a refusal changed
// nothing, so a retry may as well be decided anew.
//
// A command with a request ID travels as its own kind: the old kind's
// encoding followed by the ID. Entries of the old kinds apply as before.
//
// An Extend needs none: a retry extends the same delivery again from its
// own arrival (later than the consumer started counting, invariant 3), or
// is refused as stale when the delivery ended in between, which is true.

// idTail writes the request ID that an ID kind carries after the old
// kind's encoding; a command without one is of the old kind.
func idTail(e *encoder, id string) {
	if id != "" {
		e.str(id)
	}
}

// idKind is withID when the command carries a request ID, else old.
func idKind(id string, old, withID Kind) Kind {
	if id != "" {
		return withID
	}
	return old
}

func (c *QueueCreate) Kind() Kind  { return idKind(c.RequestID, KindQueueCreate, KindQueueCreateID) }
func (c *QueueRedrive) Kind() Kind { return idKind(c.RequestID, KindQueueRedrive, KindQueueRedriveID) }
func (c *QueuePurge) Kind() Kind   { return idKind(c.RequestID, KindQueuePurge, KindQueuePurgeID) }
func (c *QueueDelete) Kind() Kind  { return idKind(c.RequestID, KindQueueDelete, KindQueueDeleteID) }

// Kind: only a bound Nack carries a request ID (a node proposes no other).
func (c *QueueNack) Kind() Kind {
	if c.Bound {
		return idKind(c.RequestID, KindQueueNackBy, KindQueueNackID)
	}
	return KindQueueNack
}

func (c *QueueCreate) apply(s *State, _ uint64, now int64) Result {
	return s.once(c, c.Caller, c.RequestID, now, func() Result { return s.queues.create(now, c) })
}

// An unbound Nack's encoding has no room for an ID: none is used, so a
// node applies such a command alike before and after its log round trip.
func (c *QueueNack) apply(s *State, _ uint64, now int64) Result {
	id := c.RequestID
	if !c.Bound {
		id = ""
	}
	return s.once(c, c.Consumer, id, now, func() Result { return s.queues.nack(now, c) })
}

func (c *QueueRedrive) apply(s *State, _ uint64, now int64) Result {
	return s.once(c, c.Actor, c.RequestID, now, func() Result { return s.queues.redrive(now, c) })
}

func (c *QueuePurge) apply(s *State, ix uint64, now int64) Result {
	return s.once(c, c.Actor, c.RequestID, now, func() Result { return s.queues.purge(ix, now, c) })
}

func (c *QueueDelete) apply(s *State, ix uint64, now int64) Result {
	return s.once(c, c.Actor, c.RequestID, now, func() Result { return s.queues.delete(ix, now, c) })
}

// once applies c, or answers its retry: a command with request ID id,
// scoped to caller, that succeeded within the dedup window is answered as
// it was then. The fingerprint is c's whole encoding, so the ID reused
// for another request is refused.
func (s *State) once(c Command, caller, id string, now int64, act func() Result) Result {
	if id == "" {
		return act()
	}
	if err := validateRequestID(id); err != nil {
		return Result{Err: err}
	}
	e := &s.scratch
	e.b = e.b[:0]
	c.encode(e)
	key, sum, k := requestKey(caller, [32]byte{}, id), sumOf(e), c.Kind()
	if r, ok := s.dedup.lookup(key, id, k, sum); ok {
		return r
	}
	r := act()
	if r.Err == nil {
		s.dedup.put(key, k, sum, now, r, s.cfg)
	}
	return r
}

// How the ID kinds are decoded: the old kind's encoding, then the ID.
// Kind names the ID kind for a command with a request ID, so a node
// proposes the plain type; a decoded one always carries its ID.

type QueueCreateID struct{ QueueCreate }

func (*QueueCreateID) Kind() Kind          { return KindQueueCreateID }
func (c *QueueCreateID) encode(e *encoder) { c.QueueCreate.encode(e); emptyTail(e, c.RequestID) }
func (c *QueueCreateID) decode(d *decoder) { c.QueueCreate.decode(d); c.RequestID = d.str() }

type QueueNackID struct{ QueueNack }

func (*QueueNackID) Kind() Kind          { return KindQueueNackID }
func (c *QueueNackID) encode(e *encoder) { c.QueueNack.encode(e); emptyTail(e, c.RequestID) }
func (c *QueueNackID) decode(d *decoder) { c.QueueNack.decode(d); c.RequestID = d.str() }

type QueueRedriveID struct{ QueueRedrive }

func (*QueueRedriveID) Kind() Kind          { return KindQueueRedriveID }
func (c *QueueRedriveID) encode(e *encoder) { c.QueueRedrive.encode(e); emptyTail(e, c.RequestID) }
func (c *QueueRedriveID) decode(d *decoder) { c.QueueRedrive.decode(d); c.RequestID = d.str() }

type QueuePurgeID struct{ QueuePurge }

func (*QueuePurgeID) Kind() Kind          { return KindQueuePurgeID }
func (c *QueuePurgeID) encode(e *encoder) { c.QueuePurge.encode(e); emptyTail(e, c.RequestID) }
func (c *QueuePurgeID) decode(d *decoder) { c.QueuePurge.decode(d); c.RequestID = d.str() }

type QueueDeleteID struct{ QueueDelete }

func (*QueueDeleteID) Kind() Kind          { return KindQueueDeleteID }
func (c *QueueDeleteID) encode(e *encoder) { c.QueueDelete.encode(e); emptyTail(e, c.RequestID) }
func (c *QueueDeleteID) decode(d *decoder) { c.QueueDelete.decode(d); c.RequestID = d.str() }

// emptyTail writes the empty ID of a decoded ID-kind command that carried
// one (idTail writes a present one), so it encodes as it was decoded.
func emptyTail(e *encoder, id string) {
	if id == "" {
		e.str("")
	}
}

// queueAnswersVersion is the snapshot version that added a queue
// command's answer to its dedup record.
const queueAnswersVersion = 13

// queueAnswer keeps the answer of a Create, Redrive or Purge with a
// request ID (a count, and whether the queue existed) in its dedup record
// (snapshot version 13).
var queueAnswer = &answerCodec{since: queueAnswersVersion,
	write: func(e *encoder, r Result) { encodeQueueAnswer(e, r.Queue()) },
	read:  func(d *decoder, r *Result) { r.Answer = decodeQueueAnswer(d) },
}

func encodeQueueAnswer(e *encoder, q *QueueResult) {
	if q == nil {
		q = &QueueResult{}
	}
	e.uvarint(uint64(q.Moved))
	e.bool(q.Existed)
}

func decodeQueueAnswer(d *decoder) *QueueResult {
	moved := d.uvarint()
	if moved > math.MaxInt32 {
		d.fail()
	}
	return &QueueResult{Moved: int(moved), Existed: d.bool()}
}
