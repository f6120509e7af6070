package fsm

import (
	"sort"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// QueueInfo is what an inspection of a queue shows (leasehold/queues.go).
type QueueInfo = leasehold.QueueInfo

// Queue returns a queue's settings and counts.
func (s *State) Queue(name string) (QueueInfo, bool) {
	q := s.queues.byName.at(name)
	if q == nil {
		return QueueInfo{}, false
	}
	info := QueueInfo{Name: name, Settings: q.QueueSettings, CreatedAt: nanosTime(q.createdAt), Depth: q.depth,
		InFlight: len(q.inflight), Dead: len(q.dead), Bytes: q.bytes, Keys: len(q.keys)}
	var oldest int64
	for _, k := range q.keys {
		if len(k.msgs) > 0 && (oldest == 0 || k.msgs[0].sentAt < oldest) {
			oldest = k.msgs[0].sentAt // a key's head is its oldest
		}
	}
	info.OldestAt = nanosTime(oldest)
	if info.DedupIDs = len(q.dedupLog); info.DedupIDs > 0 {
		info.OldestDedupAt = nanosTime(q.dedupLog[0].at)
	}
	return info, true
}

// NextReady is when the next message of the queue can be handed out (the
// entries' clock; at or before now means a Receive gets something), for a
// long-polling Receive to know when to try. ok is false when no key has a
// message that is not in flight or blocked.
func (s *State) NextReady(name string) (at time.Time, ok bool) {
	q := s.queues.byName.at(name)
	if q == nil || len(q.ready) == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, q.ready[0].msgs[0].notReady).UTC(), true
}

// Queues lists the queues' names in order.
func (s *State) Queues() []string { return sortedCowKeys(&s.queues.byName) }

// InFlight lists up to limit deliveries in flight (0: all), oldest
// message first: the keys with a message in flight and who holds them.
func (s *State) InFlight(name string, limit int) []Delivery {
	q := s.queues.byName.at(name)
	if q == nil {
		return nil
	}
	out := make([]Delivery, 0, len(q.inflight))
	for _, m := range q.inflight {
		out = append(out, Delivery{Queue: name, Key: m.key.name, Sequence: m.seq, Token: m.token,
			Receives: int(m.receives), Body: m.body, SentAt: nanosTime(m.sentAt), Consumer: m.consumer, Visibility: m.vis})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sequence < out[j].Sequence })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// DeadLetter is a message that used up its receives (leasehold/queues.go);
// its Body is shared with the state.
type DeadLetter = leasehold.DeadLetter

// DeadLetters lists up to limit dead letters (0: all), oldest first.
func (s *State) DeadLetters(name string, limit int) []DeadLetter {
	q := s.queues.byName.at(name)
	if q == nil {
		return nil
	}
	n := len(q.dead)
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]DeadLetter, n)
	for i, dl := range q.dead[:n] {
		out[i] = DeadLetter{Sequence: dl.seq, Key: dl.key, Body: dl.body, SentAt: nanosTime(dl.sentAt),
			Receives: int(dl.receives), Note: dl.note, DiedAt: nanosTime(dl.diedAt)}
	}
	return out
}

// QueueBytes is the bytes of message bodies in all queues, against
// Config.MaxQueueBytes.
func (s *State) QueueBytes() int { return s.queues.bytes }
