package fsm

import (
	"container/heap"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Keyed queues. Messages live in the replicated state: in memory on every
// node and in every snapshot. Each queue keeps, per key, its messages in
// send order; a key is "ready" when its head message is deliverable and
// not in flight, and the ready keys wait in a heap ordered by (time the
// head becomes deliverable, head sequence), so a Receive hands out the
// oldest work first and at most one message per key is ever in flight.
//
// Each delivery carries a fencing token from the state's token counter
// (nextToken): tokens strictly increase across the whole log, so also per
// key across deliveries and redeliveries. Ack, Nack and Extend must name
// the delivery's current token; a consumer paused past its visibility is
// refused with the stale-token error, and the downstream store can refuse
// its writes by the same token. They must also come from the delivery's
// consumer (Settler): a token is guessable, a consumer's credentials are not.
//
// Visibility deadlines are the leader's: it proposes QueueExpire when one
// runs out on its monotonic clock (a countdown: countdown.go) and
// restarts the countdowns on takeover (EachCountdown).
// A message's delay is measured against the entries' wall-clock time, the
// only clock the state sees: a delay is a hint, never a safety property.

// The queues' vocabulary and limits are leasehold's (leasehold/queues.go):
// a queue's settings (Retention: QueueRetire) and dead-letter mode, and
// the bounds the edge checks and the state checks again. MaxQueueBody is
// the state's ceiling: a node refuses bodies over its own, smaller limit
// at the API edge, so nodes configured apart still apply every entry alike.
type (
	DeadLetterMode = leasehold.DeadLetterMode
	QueueSettings  = leasehold.QueueSettings
)

const (
	DeadLetterSkip  = leasehold.DeadLetterSkip
	DeadLetterBlock = leasehold.DeadLetterBlock
	MaxQueueBatch   = leasehold.MaxQueueBatch
	MaxQueueBody    = leasehold.MaxQueueBody
)

// maxLoggedNackDelay is the Nack delay the state machine took before the
// limit became leasehold.MaxQueueDelay, the edge's from the start: no node
// takes more from a caller, but an entry a log holds applies as it did.
const maxLoggedNackDelay = 12 * time.Hour

// DefaultQueueSettings fill what a QueueCreate leaves zero.
func DefaultQueueSettings() QueueSettings { return leasehold.DefaultQueueSettings() }

func fillQueueSettings(q *QueueSettings) {
	d := DefaultQueueSettings()
	if q.Visibility == 0 {
		q.Visibility = d.Visibility
	}
	if q.MaxReceives == 0 {
		q.MaxReceives = d.MaxReceives
	}
	if q.Retention == 0 {
		q.Retention = d.Retention
	}
	if q.MaxDepth == 0 {
		q.MaxDepth = d.MaxDepth
	}
	if q.MaxBytes == 0 {
		q.MaxBytes = d.MaxBytes
	}
	if q.MaxInFlightPerConsumer == 0 {
		q.MaxInFlightPerConsumer = d.MaxInFlightPerConsumer
	}
	if q.DedupWindow == 0 {
		q.DedupWindow = d.DedupWindow
	}
	if q.DeadLetter == 0 {
		q.DeadLetter = d.DeadLetter
	}
}

func validateQueueSettings(q *QueueSettings) error {
	if err := leasehold.ValidateDuration("visibility", q.Visibility, leasehold.MinQueueVisibility, leasehold.MaxQueueVisibility); err != nil {
		return err
	}
	if q.MaxReceives > leasehold.MaxQueueReceives {
		return leasehold.Errorf(leasehold.CodeInvalid, "max_receives is %d; the limit is %d", q.MaxReceives, leasehold.MaxQueueReceives)
	}
	if err := leasehold.ValidateDuration("retention", q.Retention, leasehold.MinQueueRetention, leasehold.MaxQueueRetention); err != nil {
		return err
	}
	if err := leasehold.ValidateDuration("dedup_window", q.DedupWindow, leasehold.MinQueueDedupWindow, leasehold.MaxQueueDedupWindow); err != nil {
		return err
	}
	if q.MaxDepth < 0 || q.MaxBytes < 0 || q.MaxInFlightPerConsumer < 0 {
		return leasehold.Errorf(leasehold.CodeInvalid, "max_depth, max_bytes and max_in_flight_per_consumer must not be negative")
	}
	if q.DeadLetter != DeadLetterSkip && q.DeadLetter != DeadLetterBlock {
		return leasehold.Errorf(leasehold.CodeInvalid, "dead_letter must be skip or block, not %d", q.DeadLetter)
	}
	return nil
}

type qmsg struct {
	seq      uint64
	key      *qkey
	body     []byte
	sentAt   int64
	notReady int64 // not deliverable before this (delay, nack backoff)
	receives uint32
	note     string // the last Nack's error note
	// The delivery in flight (token 0: none).
	token    uint64
	consumer string
	vis      time.Duration // its visibility, for a new leader's countdown
}

type qkey struct {
	name    string
	msgs    []*qmsg // send order; msgs[0] is the head
	blocked bool    // its head was dead-lettered in block mode
	hix     int     // index in the ready heap, -1 when not in it
}

type deadLetter struct {
	seq      uint64
	key      string
	body     []byte
	sentAt   int64
	receives uint32
	note     string
	diedAt   int64
}

type dedupEntry struct {
	id  string
	seq uint64
	at  int64
}

type queue struct {
	QueueSettings
	createdAt int64
	nextSeq   uint64
	keys      map[string]*qkey
	ready     readyHeap
	inflight  map[uint64]*qmsg // by sequence
	consumers map[string]int   // deliveries in flight by consumer (derived from inflight)
	dead      []deadLetter     // oldest first
	dedupIDs  map[string]uint64
	dedupLog  []dedupEntry        // arrival order, for the window
	requests  map[string]string   // request part -> dedup id, of the ids a request ID made (RequestDedupPart)
	receipts  map[string][]uint64 // receipt -> its deliveries still in flight, by sequence
	receiptOf map[uint64]string   // a delivery in flight -> its Receive's receipt, if it had one
	depth     int                 // queued, in flight and dead
	bytes     int                 // their bodies
}

// The queue sub-state: the queues by name, and the bytes of message
// bodies in all of them against Config.MaxQueueBytes.
type queueState struct {
	st     *State
	byName cowMap[string, *queue]
	bytes  int
}

func (qs *queueState) init(s *State) {
	*qs = queueState{st: s, byName: newCowMap[string, *queue]()}
	s.track(&qs.byName)
}

func (qs *queueState) captureInto(v *State) {
	v.queues = queueState{st: v, byName: qs.byName.freeze(), bytes: qs.bytes}
}

func (qs *queueState) eachCountdown(f func(Countdown)) {
	for name, q := range qs.byName.all() {
		for _, m := range q.inflight {
			f(visibilityCountdown(name, m, m.vis))
		}
	}
}

func (*queueState) leaseEnded(*lease) {}

// readyHeap orders ready keys by when their head becomes deliverable,
// then by its sequence: the oldest work first, deterministically.
type readyHeap []*qkey

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	a, b := h[i].msgs[0], h[j].msgs[0]
	if a.notReady != b.notReady {
		return a.notReady < b.notReady
	}
	return a.seq < b.seq
}
func (h readyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].hix = i; h[j].hix = j }
func (h *readyHeap) Push(x any)   { k := x.(*qkey); k.hix = len(*h); *h = append(*h, k) }
func (h *readyHeap) Pop() any {
	old := *h
	k := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	k.hix = -1
	return k
}

// QueueObserver hears, inside Apply, what a long poll and metrics want
// (a delivery's visibility is a countdown: countdown.go). An Observer
// that implements it receives the calls.
type QueueObserver interface {
	// QueueReady says a command left the queue with a key ready, maybe
	// not before NextReady, or deleted the queue: a long-polling Receive
	// can try again.
	QueueReady(queue string)
	// QueueDeadLettered says a message used up its receives.
	QueueDeadLettered(queue string, seq uint64)
}

// queueWake tells the observer that name has a ready key.
func (qs *queueState) wake(name string, q *queue) {
	if o := qs.observer(); o != nil && len(q.ready) > 0 {
		o.QueueReady(name)
	}
}

// Delivery is one message handed out by a Receive (leasehold/queues.go):
// Sequence and Token name it, Consumer is the Receive's caller, and Body
// is shared with the state.
type Delivery = leasehold.Delivery

func (*QueueResult) answer() {}

// Queue is a queue command's answer (*QueueResult), nil for none.
func (r Result) Queue() *QueueResult {
	a, _ := r.Answer.(*QueueResult)
	return a
}

// QueueResult is what a queue command answers besides an error.
type QueueResult struct {
	Seqs       []uint64   // Send: one per message (the first's, for a duplicate)
	Duplicate  []bool     // Send: which messages were duplicates
	Deliveries []Delivery // Receive
	Moved      int        // Redrive, Purge: messages moved or dropped
	SentAt     time.Time  // Ack: when the acked message was sent (zero for a retried Ack)
	Existed    bool       // Create: the queue was there already, with these settings
}

func (qs *queueState) of(name string) (*queue, error) {
	q, _ := qs.byName.mut(name) // every caller changes it
	if q == nil {
		return nil, leasehold.Errorf(leasehold.CodeNotFound, "queue %q does not exist", name)
	}
	return q, nil
}

func (qs *queueState) observer() QueueObserver {
	s := qs.st
	o, _ := s.hooks.obs.(QueueObserver)
	return o
}

func (qs *queueState) create(now int64, c *QueueCreate) Result {
	if err := leasehold.ValidateName("queue name", c.Queue, leasehold.MaxResourceLen, true); err != nil {
		return Result{Err: err}
	}
	set := c.Settings
	fillQueueSettings(&set)
	if err := validateQueueSettings(&set); err != nil {
		return Result{Err: err}
	}
	if q := qs.byName.at(c.Queue); q != nil {
		if q.QueueSettings != set {
			return Result{Err: leasehold.Errorf(leasehold.CodeHeld, "queue %q already exists with other settings", c.Queue)}
		}
		return Result{Dup: true, Answer: &QueueResult{Existed: true}}
	}
	qs.byName.set(c.Queue, newQueue(set, now))
	return Result{Answer: &QueueResult{}}
}

func newQueue(set QueueSettings, now int64) *queue {
	return &queue{QueueSettings: set, createdAt: now, nextSeq: 1, keys: make(map[string]*qkey),
		inflight: make(map[uint64]*qmsg), consumers: make(map[string]int), dedupIDs: make(map[string]uint64), requests: make(map[string]string),
		receipts: make(map[string][]uint64), receiptOf: make(map[uint64]string)}
}

func (qs *queueState) send(now int64, c *QueueSend) Result {
	q, err := qs.of(c.Queue)
	if err != nil {
		return Result{Err: err}
	}
	if n := len(c.Messages); n == 0 || n > MaxQueueBatch {
		return Result{Err: leasehold.Errorf(leasehold.CodeInvalid, "a send carries 1 to %d messages, not %d", MaxQueueBatch, n)}
	}
	q.evictDedup(now)
	adds, bytes, ids := 0, 0, 0
	for i := range c.Messages {
		m := &c.Messages[i]
		if err := validateQueueMessage(m); err != nil {
			return Result{Err: leasehold.Errorf(leasehold.CodeOf(err), "message %d: %v", i, err)}
		}
		if q.reusedRequest(m.DedupID) {
			return Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
				"messages[%d]: its request_id was used within the queue's dedup window for another message (another key, body, delay or batch size); "+
					"a retry must repeat its request exactly, and a new request needs a new request_id", i)}
		}
		if q.duplicate(c.Messages[:i], m.DedupID) {
			continue
		}
		adds++
		bytes += len(m.Body)
		if m.DedupID != "" {
			ids++
		}
	}
	if err := qs.room(c.Queue, q, adds, bytes, ids); err != nil {
		return Result{Err: err}
	}
	res := &QueueResult{Seqs: make([]uint64, len(c.Messages)), Duplicate: make([]bool, len(c.Messages))}
	for i := range c.Messages {
		m := &c.Messages[i]
		if seq, dup := q.dedupIDs[m.DedupID]; dup && m.DedupID != "" {
			res.Seqs[i], res.Duplicate[i] = seq, true
			continue
		}
		seq := q.nextSeq
		q.nextSeq++
		if m.DedupID != "" {
			q.remember(dedupEntry{id: m.DedupID, seq: seq, at: now})
		}
		q.push(&qmsg{seq: seq, body: m.Body, sentAt: now, notReady: now + int64(max(m.Delay, 0))}, m.Key)
		qs.bytes += len(m.Body)
		res.Seqs[i] = seq
	}
	qs.wake(c.Queue, q)
	return Result{Answer: res}
}

// duplicate says whether a message with dedup id id enqueues nothing:
// the id is in the window or earlier in the same batch (at most
// MaxQueueBatch, so the scan costs less than a map would).
func (q *queue) duplicate(earlier []QueueMessage, id string) bool {
	if id == "" {
		return false
	}
	if _, dup := q.dedupIDs[id]; dup {
		return true
	}
	for i := range earlier {
		if earlier[i].DedupID == id {
			return true
		}
	}
	return false
}

func validateQueueMessage(m *QueueMessage) error {
	if err := leasehold.ValidateName("message key", m.Key, leasehold.MaxResourceLen, true); err != nil {
		return err
	}
	if len(m.Body) > MaxQueueBody {
		return leasehold.Errorf(leasehold.CodeInvalid, "the body is %d bytes; the limit is %d", len(m.Body), MaxQueueBody)
	}
	if len(m.DedupID) > leasehold.MaxResourceLen {
		return leasehold.Errorf(leasehold.CodeInvalid, "the dedup id is %d bytes; the limit is %d", len(m.DedupID), leasehold.MaxResourceLen)
	}
	return leasehold.ValidateDuration("delay", m.Delay, 0, leasehold.MaxQueueDelay)
}

// queueRoom refuses a send that would take the queue past its depth or
// bytes, or the node past its budget for all queues. Nothing accepted is
// ever dropped to make room.
func (qs *queueState) room(name string, q *queue, adds, bytes, ids int) error {
	s := qs.st
	switch {
	case s.cfg.MaxQueueDedupIDs > 0 && len(q.dedupLog)+ids > s.cfg.MaxQueueDedupIDs:
		// Forgetting an id early could enqueue a retry twice: refuse instead.
		return leasehold.Errorf(leasehold.CodeLimit,
			"queue %q remembers %d dedup ids (limit max_queue_dedup_ids %d); retry once the oldest leave the dedup window", name, len(q.dedupLog), s.cfg.MaxQueueDedupIDs)
	case q.depth+adds > q.MaxDepth:
		return leasehold.Errorf(leasehold.CodeLimit,
			"queue %q holds %d messages (limit max_depth %d); retry after consumers catch up", name, q.depth, q.MaxDepth)
	case q.bytes+bytes > q.MaxBytes:
		return leasehold.Errorf(leasehold.CodeLimit,
			"queue %q holds %d bytes (limit max_bytes %d); retry after consumers catch up", name, q.bytes, q.MaxBytes)
	case s.cfg.MaxQueueBytes > 0 && qs.bytes+bytes > s.cfg.MaxQueueBytes:
		return leasehold.Errorf(leasehold.CodeLimit,
			"the queues of this cluster hold %d bytes (limit max_queue_bytes %d); retry after consumers catch up", qs.bytes, s.cfg.MaxQueueBytes)
	}
	return nil
}

// remember keeps a dedup id for the window.
func (q *queue) remember(de dedupEntry) {
	q.dedupIDs[de.id] = de.seq
	q.dedupLog = append(q.dedupLog, de)
	if part, ok := RequestDedupPart(de.id); ok {
		q.requests[part] = de.id
	}
}

// RequestDedupPart is the request's part of a dedup id the node made from
// a Send's request ID: a zero byte and 32 hex digits (caller, request ID,
// message index), then ":" and 16 hex digits of the message's
// fingerprint. ok is false for any other id, a caller's own included (it
// has no zero byte).
func RequestDedupPart(id string) (part string, ok bool) {
	if len(id) != 50 || id[0] != 0 || id[33] != ':' {
		return "", false
	}
	return id[:33], true
}

// reusedRequest says whether id was made from a request ID that made
// another id (another message) within the window: the request ID was
// reused for something else, which is no retry.
func (q *queue) reusedRequest(id string) bool {
	part, ok := RequestDedupPart(id)
	if !ok {
		return false
	}
	first, seen := q.requests[part]
	return seen && first != id
}

func (q *queue) evictDedup(now int64) {
	cutoff, n := now-int64(q.DedupWindow), 0
	for n < len(q.dedupLog) && q.dedupLog[n].at <= cutoff {
		id := q.dedupLog[n].id
		delete(q.dedupIDs, id)
		if part, ok := RequestDedupPart(id); ok && q.requests[part] == id {
			delete(q.requests, part)
		}
		n++
	}
	// Slicing forward is O(1) a send; the next growth of the array
	// copies only the live entries, freeing the evicted ones.
	q.dedupLog = q.dedupLog[n:]
}

// push appends m to its key's messages, counting it in the queue.
func (q *queue) push(m *qmsg, key string) {
	k := q.keys[key]
	if k == nil {
		k = &qkey{name: key, hix: -1}
		q.keys[key] = k
	}
	m.key = k
	k.msgs = append(k.msgs, m)
	q.depth++
	q.bytes += len(m.body)
	q.makeReady(k)
}

// makeReady puts k in the ready heap if its head can be handed out.
func (q *queue) makeReady(k *qkey) {
	if k.hix >= 0 || k.blocked || len(k.msgs) == 0 || k.msgs[0].token != 0 {
		return
	}
	heap.Push(&q.ready, k)
}

func (qs *queueState) receive(ix uint64, now int64, c *QueueReceive) Result {
	s := qs.st
	q, err := qs.of(c.Queue)
	if err != nil {
		return Result{Err: err}
	}
	if c.Max < 1 || c.Max > MaxQueueBatch {
		return Result{Err: leasehold.Errorf(leasehold.CodeInvalid, "max is %d; receive 1 to %d messages", c.Max, MaxQueueBatch)}
	}
	vis := c.Visibility
	if vis == 0 {
		vis = q.Visibility
	}
	if err := leasehold.ValidateDuration("visibility", vis, leasehold.MinQueueVisibility, leasehold.MaxQueueVisibility); err != nil {
		return Result{Err: err}
	}
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	receipt := receiptOf(c)
	if res, ok := qs.retried(c.Queue, q, receipt, vis); ok {
		return Result{Answer: res, Dup: true}
	}
	// A consumer gets what is left of its in-flight allowance, and is
	// refused when nothing is: it must ack (or let expire) first.
	room := q.MaxInFlightPerConsumer - q.consumers[c.Caller]
	if room <= 0 {
		return Result{Err: leasehold.Errorf(leasehold.CodeLimit,
			"consumer %q has %d deliveries of queue %q in flight (limit max_in_flight_per_consumer %d); ack some first", c.Caller, q.consumers[c.Caller], c.Queue, q.MaxInFlightPerConsumer)}
	}
	want := min(c.Max, room)
	res := &QueueResult{Deliveries: make([]Delivery, 0, min(want, len(q.ready)))}
	for len(res.Deliveries) < want && len(q.ready) > 0 && q.ready[0].msgs[0].notReady <= now {
		k := heap.Pop(&q.ready).(*qkey)
		m := k.msgs[0]
		m.token = s.nextToken(ix)
		m.receives++
		m.consumer, m.vis = c.Caller, vis
		q.inflight[m.seq] = m
		q.consumers[m.consumer]++
		res.Deliveries = append(res.Deliveries, Delivery{Queue: c.Queue, Key: k.name, Sequence: m.seq, Token: m.token,
			Receives: int(m.receives), Body: m.body, SentAt: nanosTime(m.sentAt), Consumer: m.consumer, Visibility: vis})
		s.armVisibility(c.Queue, m, vis)
	}
	q.keepReceipt(receipt, res.Deliveries)
	return Result{Answer: res}
}

// delivery finds the message in flight as delivery (seq, token).
func (qs *queueState) delivery(name string, seq, token uint64) (*queue, *qmsg, error) {
	q, err := qs.of(name)
	if err != nil {
		return nil, nil, err
	}
	m := q.inflight[seq]
	if m == nil || m.token != token {
		return q, nil, leasehold.Errorf(leasehold.CodeStaleToken,
			"delivery %d (token %d) of queue %q is no longer in flight: its visibility ran out or it was acked, nacked or redelivered", seq, token, name)
	}
	return q, m, nil
}

// endDelivery takes m out of flight.
func (qs *queueState) endDelivery(name string, q *queue, m *qmsg) {
	s := qs.st
	delete(q.inflight, m.seq)
	q.release(m.consumer)
	q.dropReceipt(m)
	s.disarm(visibilityKey(name, m.token))
	m.token, m.consumer = 0, ""
}

// release takes one delivery off consumer's count.
func (q *queue) release(consumer string) {
	if q.consumers[consumer]--; q.consumers[consumer] <= 0 {
		delete(q.consumers, consumer)
	}
}

func (qs *queueState) ack(now int64, c *QueueAck) Result {
	s := qs.st
	key := requestKey(c.Caller, [32]byte{}, c.RequestID)
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	sum := c.sum(&s.scratch)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindQueueAck, sum); ok {
		return r
	}
	q, m, err := qs.delivery(c.Queue, c.Seq, c.Token)
	if err == nil {
		err = c.check(c.Queue, m)
	}
	if err != nil {
		return Result{Err: err}
	}
	qs.endDelivery(c.Queue, q, m)
	k := m.key
	k.msgs[0] = nil
	k.msgs = k.msgs[1:]
	qs.dropCounted(q, m.body)
	q.afterHead(k)
	qs.wake(c.Queue, q)
	s.dedup.put(key, KindQueueAck, sum, now, Result{}, s.cfg)
	return Result{Answer: &QueueResult{SentAt: nanosTime(m.sentAt)}}
}

func (c *QueueAck) sum(e *encoder) fingerprint {
	if !e.startSum(false, c.RequestID) {
		return fingerprint{}
	}
	e.str(c.Queue)
	e.uvarint(c.Seq)
	e.uvarint(c.Token)
	c.Settler.encode(e)
	return sumOf(e)
}

func (qs *queueState) dropCounted(q *queue, body []byte) {
	q.depth--
	q.bytes -= len(body)
	qs.bytes -= len(body)
}

// afterHead readies k's next message, or forgets k when it is empty.
func (q *queue) afterHead(k *qkey) {
	if len(k.msgs) == 0 {
		k.msgs = nil // drop the old array; a restored key has none either
	}
	if len(k.msgs) == 0 && !k.blocked {
		delete(q.keys, k.name)
		return
	}
	q.makeReady(k)
}

func (qs *queueState) nack(now int64, c *QueueNack) Result {
	q, m, err := qs.delivery(c.Queue, c.Seq, c.Token)
	if err == nil {
		err = c.check(c.Queue, m)
	}
	if err != nil {
		return Result{Err: err}
	}
	if err := leasehold.ValidateDuration("delay", c.Delay, 0, maxLoggedNackDelay); err != nil {
		return Result{Err: err}
	}
	m.note = c.Note
	qs.requeue(now, c.Queue, q, m, c.Delay)
	return Result{}
}

func (qs *queueState) expire(now int64, c *QueueExpire) Result {
	q, m, err := qs.delivery(c.Queue, c.Seq, c.Token)
	if err != nil {
		return Result{} // a stale timer: the delivery ended already
	}
	if m.note == "" {
		m.note = "visibility timeout"
	}
	qs.requeue(now, c.Queue, q, m, 0)
	return Result{}
}

// requeue ends m's delivery and returns it to the head of its key, or to
// the dead letters once it has used its receives.
func (qs *queueState) requeue(now int64, name string, q *queue, m *qmsg, delay time.Duration) {
	qs.endDelivery(name, q, m)
	k := m.key
	if m.receives >= q.MaxReceives {
		k.msgs[0] = nil
		k.msgs = k.msgs[1:]
		q.dead = append(q.dead, deadLetter{seq: m.seq, key: k.name, body: m.body, sentAt: m.sentAt,
			receives: m.receives, note: m.note, diedAt: now})
		k.blocked = q.DeadLetter == DeadLetterBlock
		q.afterHead(k)
		if o := qs.observer(); o != nil {
			o.QueueDeadLettered(name, m.seq)
		}
	} else {
		m.notReady = now + int64(delay)
		q.makeReady(k)
	}
	qs.wake(name, q)
}

func (qs *queueState) extend(c *QueueExtend) Result {
	s := qs.st
	_, m, err := qs.delivery(c.Queue, c.Seq, c.Token)
	if err == nil {
		err = c.check(c.Queue, m)
	}
	if err != nil {
		return Result{Err: err}
	}
	if err := leasehold.ValidateDuration("visibility", c.Visibility, leasehold.MinQueueVisibility, leasehold.MaxQueueVisibility); err != nil {
		return Result{Err: err}
	}
	m.vis = c.Visibility
	s.armVisibility(c.Queue, m, c.Visibility) // restarts the countdown
	return Result{}
}

func (qs *queueState) redrive(now int64, c *QueueRedrive) Result {
	q, err := qs.of(c.Queue)
	if err != nil {
		return Result{Err: err}
	}
	n := len(q.dead)
	if c.Max > 0 && c.Max < n {
		n = c.Max
	}
	for _, dl := range q.dead[:n] {
		m := &qmsg{seq: dl.seq, body: dl.body, sentAt: dl.sentAt, notReady: now, note: dl.note}
		k := q.keys[dl.key]
		if k != nil && k.blocked {
			// A blocked key waits for this very message: back to its head.
			k.blocked = false
			m.key = k
			k.msgs = append([]*qmsg{m}, k.msgs...)
			q.makeReady(k)
			continue
		}
		q.depth-- // push counts it again
		q.bytes -= len(dl.body)
		q.push(m, dl.key)
	}
	q.dead = append(q.dead[:0], q.dead[n:]...)
	qs.wake(c.Queue, q)
	return Result{Answer: &QueueResult{Moved: n}}
}

func (qs *queueState) purge(ix uint64, now int64, c *QueuePurge) Result {
	s := qs.st
	q, err := qs.of(c.Queue)
	if err != nil {
		return Result{Err: err}
	}
	moved := len(q.dead)
	for _, dl := range q.dead {
		qs.dropCounted(q, dl.body)
	}
	q.dead = nil
	for name, k := range q.keys {
		keep := k.msgs[:0]
		for _, m := range k.msgs {
			if m.token != 0 {
				keep = append(keep, m) // in flight: its consumer still acks it
				continue
			}
			qs.dropCounted(q, m.body)
			moved++
		}
		clear(k.msgs[len(keep):])
		k.msgs, k.blocked = keep, false
		if len(k.msgs) == 0 {
			delete(q.keys, name)
		}
	}
	q.ready = q.ready[:0]
	for _, k := range sortedKeys(q.keys) {
		q.keys[k].hix = -1
		q.makeReady(q.keys[k])
	}
	s.auditName(ix, now, c.Actor, "queue-purge", c.Queue, c.Reason)
	return Result{Answer: &QueueResult{Moved: moved}}
}

func (qs *queueState) retire(now int64, c *QueueRetire) Result {
	q, err := qs.of(c.Queue)
	if err != nil {
		return Result{Err: err}
	}
	q.evictDedup(now) // else ids past the window wait for the queue's next send
	dropped := 0
	dead := q.dead[:0]
	for _, dl := range q.dead {
		if dl.sentAt >= c.Before {
			dead = append(dead, dl)
			continue
		}
		qs.dropCounted(q, dl.body)
		dropped++
		if k := q.keys[dl.key]; k != nil && k.blocked { // nothing is left to redrive
			k.blocked = false
			q.afterHead(k)
		}
	}
	clear(q.dead[len(dead):])
	q.dead = dead
	for _, name := range sortedKeys(q.keys) {
		k := q.keys[name]
		keep := k.msgs[:0]
		for _, m := range k.msgs {
			if m.sentAt >= c.Before || m.token != 0 {
				keep = append(keep, m)
				continue
			}
			qs.dropCounted(q, m.body)
			dropped++
		}
		if len(keep) == len(k.msgs) {
			continue
		}
		clear(k.msgs[len(keep):])
		k.msgs = keep
		if k.hix >= 0 { // its head changed: out of the heap, and back if it has one
			heap.Remove(&q.ready, k.hix)
		}
		q.afterHead(k)
	}
	qs.wake(c.Queue, q)
	return Result{Answer: &QueueResult{Moved: dropped}}
}

func (qs *queueState) delete(ix uint64, now int64, c *QueueDelete) Result {
	s := qs.st
	q, err := qs.of(c.Queue)
	if err != nil {
		return Result{Err: err}
	}
	for _, m := range q.inflight {
		s.disarm(visibilityKey(c.Queue, m.token))
	}
	qs.bytes -= q.bytes
	qs.byName.del(c.Queue)
	if o := qs.observer(); o != nil {
		o.QueueReady(c.Queue) // wakes long polls, to answer that it is gone
	}
	s.auditName(ix, now, c.Actor, "queue-delete", c.Queue, c.Reason)
	return Result{}
}
