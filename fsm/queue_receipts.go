package fsm

import (
	"slices"
	"time"
)

// Receipts make a Receive safe to retry. A Receive with a request ID
// records, on each delivery it hands out, its receipt: the request ID
// scoped to the consumer. A retry with the same ID, while any of those
// deliveries is still in flight, answers them again (same sequences and
// tokens) instead of handing out more, so a lost answer leaves nothing in
// flight to nobody. A receipt lives as long as one of its deliveries is
// in flight: its memory is bounded by the deliveries in flight, and a
// retry after all of them ended (acked, nacked or expired) receives anew.
//
// An answered retry restarts the deliveries' visibility, as an Extend
// does: the consumer counts its deadline from before the retry was sent
// (invariant 3), so the leader's countdown must not have started earlier.

// QueueReceiveID is how a Receive with a request ID is decoded from the
// log. QueueReceive.Kind names this kind for such a Receive, so the
// service proposes a plain *QueueReceive.
type QueueReceiveID struct {
	QueueReceive
}

func (*QueueReceiveID) Kind() Kind { return KindQueueReceiveID }

func (c *QueueReceiveID) apply(s *State, ix uint64, now int64) Result {
	return s.queues.receive(ix, now, &c.QueueReceive)
}

func (c *QueueReceiveID) encode(e *encoder) { c.QueueReceive.encode(e) }

func (c *QueueReceiveID) decode(d *decoder) {
	c.QueueReceive.decode(d)
	c.RequestID = d.str()
}

// receiptOf is the receipt of a Receive: "" without a request ID.
func receiptOf(c *QueueReceive) string { return requestKey(c.Caller, [32]byte{}, c.RequestID) }

// retried answers a retried Receive from its receipt; ok is false when
// the receipt is unknown (a first attempt, or all its deliveries ended).
func (qs *queueState) retried(name string, q *queue, receipt string, vis time.Duration) (res *QueueResult, ok bool) {
	s := qs.st
	seqs := q.receipts[receipt]
	if receipt == "" || len(seqs) == 0 {
		return nil, false
	}
	res = &QueueResult{Deliveries: make([]Delivery, 0, len(seqs))}
	for _, seq := range seqs {
		m := q.inflight[seq]
		m.vis = vis
		res.Deliveries = append(res.Deliveries, Delivery{Queue: name, Key: m.key.name, Sequence: m.seq, Token: m.token,
			Receives: int(m.receives), Body: m.body, SentAt: nanosTime(m.sentAt), Consumer: m.consumer, Visibility: vis})
		s.armVisibility(name, m, vis) // restarts the countdown
	}
	return res, true
}

// keepReceipt records receipt on the deliveries a Receive handed out.
func (q *queue) keepReceipt(receipt string, ds []Delivery) {
	if receipt == "" || len(ds) == 0 {
		return
	}
	seqs := make([]uint64, len(ds))
	for i, d := range ds {
		seqs[i] = d.Sequence
		q.receiptOf[d.Sequence] = receipt
	}
	slices.Sort(seqs)
	q.receipts[receipt] = seqs
}

// dropReceipt forgets m's part of its receipt as its delivery ends.
// Receipts are kept beside the deliveries in flight, not in every message:
// a queued message costs nothing more for them.
func (q *queue) dropReceipt(m *qmsg) {
	receipt, ok := q.receiptOf[m.seq]
	if !ok {
		return
	}
	delete(q.receiptOf, m.seq)
	seqs := slices.DeleteFunc(q.receipts[receipt], func(seq uint64) bool { return seq == m.seq })
	if len(seqs) == 0 {
		delete(q.receipts, receipt)
	} else {
		q.receipts[receipt] = seqs
	}
}

// HasReceipt reports whether a Receive of consumer with request ID id
// would be answered from its receipt (a retry whose deliveries are still
// in flight): the service proposes such a retry at once instead of
// waiting for a message.
func (s *State) HasReceipt(name, consumer, id string) bool {
	q := s.queues.byName.at(name)
	return q != nil && id != "" && len(q.receipts[requestKey(consumer, [32]byte{}, id)]) > 0
}
