package leasehold

import "time"

// The vocabulary of keyed queues: their limits, a queue's settings and
// inspection, and the messages, deliveries and dead letters the API edge,
// the state machine, the client and the CLI all pass around.

// Limits of keyed queues.
const (
	// MaxQueueBatch is the most messages one Send carries, one Receive
	// hands out, or one AckBatch acks.
	MaxQueueBatch = 100
	// MaxQueueBody is the largest message body the state accepts. A node
	// refuses bodies over its own, smaller limit (default
	// DefaultMaxQueueBody) at the API edge; the state checks only this
	// ceiling, so nodes configured apart still apply every entry alike.
	MaxQueueBody = 1 << 20
	// DefaultMaxQueueBody is a node's limit of a message's body unless it
	// is configured otherwise (serve --max-queue-body-bytes).
	DefaultMaxQueueBody = 256 << 10
	// MinQueueVisibility and MaxQueueVisibility bound a delivery's
	// visibility: a queue's default, a Receive's and an Extend's.
	MinQueueVisibility = time.Second
	MaxQueueVisibility = 12 * time.Hour
	// MaxQueueDelay bounds a message's delay (Send) and a Nack's backoff.
	MaxQueueDelay = 15 * time.Minute
	// MaxQueueWait bounds how long a Receive long-polls.
	MaxQueueWait = 20 * time.Second
	// MaxQueueReceives bounds a queue's max_receives.
	MaxQueueReceives = 1000
	// MinQueueRetention and MaxQueueRetention bound how long a queue
	// keeps a message.
	MinQueueRetention = time.Minute
	MaxQueueRetention = 14 * 24 * time.Hour
	// MinQueueDedupWindow and MaxQueueDedupWindow bound how long a queue
	// remembers a dedup id.
	MinQueueDedupWindow = time.Second
	MaxQueueDedupWindow = 24 * time.Hour
	// MaxQueueNoteLen bounds a Nack's error and an Extend's progress.
	MaxQueueNoteLen = 1 << 10
	// MaxQueueConsumerLen bounds a consumer's name.
	MaxQueueConsumerLen = 128
)

// DeadLetterMode says what a key does once its head message used up its
// receives and moved to the dead letters.
type DeadLetterMode uint8

const (
	// DeadLetterSkip (the default) moves on to the key's next message.
	// A poison message should not stall every later message of its key
	// until an operator notices; the dead letter is kept, visible and
	// redrivable. Queues whose consumers cannot tolerate a gap choose Block.
	DeadLetterSkip DeadLetterMode = iota + 1
	// DeadLetterBlock holds the key until its dead letter is redriven (it
	// returns to the head) or purged.
	DeadLetterBlock
)

func (m DeadLetterMode) String() string {
	switch m {
	case DeadLetterSkip:
		return "skip"
	case DeadLetterBlock:
		return "block"
	}
	return "unknown"
}

// QueueSettings are a queue's limits; zero fields take the defaults
// (DefaultQueueSettings).
type QueueSettings struct {
	Visibility             time.Duration // a delivery's default visibility
	MaxReceives            uint32        // deliveries before a message is dead-lettered
	Retention              time.Duration // how long a message is kept
	MaxDepth               int           // messages (queued, in flight, dead) at most
	MaxBytes               int           // bytes of bodies at most
	MaxInFlightPerConsumer int           // deliveries in flight per Receive caller (consumer)
	DedupWindow            time.Duration // how long a dedup id is remembered
	DeadLetter             DeadLetterMode
}

// DefaultQueueSettings fill what a queue's creation leaves zero.
func DefaultQueueSettings() QueueSettings {
	return QueueSettings{Visibility: 30 * time.Second, MaxReceives: 5, Retention: 4 * 24 * time.Hour,
		MaxDepth: 100000, MaxBytes: 64 << 20, MaxInFlightPerConsumer: 1000, DedupWindow: 5 * time.Minute,
		DeadLetter: DeadLetterSkip}
}

// QueueInfo is what an inspection of a queue shows, as a node holds it.
type QueueInfo struct {
	Name      string
	Settings  QueueSettings
	CreatedAt time.Time
	Depth     int // queued, in flight and dead
	InFlight  int
	Dead      int
	Bytes     int
	Keys      int       // keys with a message queued or in flight (or blocked)
	OldestAt  time.Time // the send time of the oldest message not dead; zero if none
	// DedupIDs are the dedup ids remembered, the oldest sent at
	// OldestDedupAt (zero if none).
	DedupIDs      int
	OldestDedupAt time.Time
}

// Message is one message to send.
type Message struct {
	Key  string
	Body []byte
	// DedupID, if set, makes a resend within the queue's dedup window
	// enqueue nothing and answer the first send's sequence.
	DedupID string
	// Delay keeps the message from delivery for this long (up to
	// MaxQueueDelay).
	Delay time.Duration
}

// Sent is the answer for one sent message.
type Sent struct {
	Sequence  uint64
	Duplicate bool // its dedup id was seen: nothing was enqueued
}

// Delivery is a message handed to a consumer. Until its visibility runs
// out, no other consumer gets a message of its key; Ack, Nack and Extend
// name it by Queue, Sequence and Token, and send Consumer back: the node
// accepts them only from the consumer the message was delivered to.
type Delivery struct {
	Queue string
	Key   string
	// Consumer is the consumer the Receive named: on the node, its caller
	// and consumer name ("caller/name"); in the Go client, the consumer
	// name the Receive gave (empty if none), which with the caller's
	// credentials names the consumer.
	Consumer string
	Sequence uint64 // the message's sequence number in its queue: the delivery id
	// Token is the delivery's fencing token: it strictly increases per
	// key across deliveries and redeliveries. Write it with the effect
	// (pgfence) so a consumer paused past its visibility cannot commit.
	Token    uint64
	Receives int    // this delivery included
	Body     []byte // on the node, shared with the state: read it, never change it
	SentAt   time.Time
	// Visibility is the delivery's visibility, as given or extended.
	Visibility time.Duration
	// Deadline is set by the Go client: the local safe deadline of the
	// delivery (invariant 3: counted from before the request, less the
	// drift allowance). Past it, the message may be out with another
	// consumer. The node leaves it zero.
	Deadline time.Time
}

// DeadLetter is a message that used up its receives.
type DeadLetter struct {
	Sequence uint64
	Key      string
	Body     []byte // on the node, shared with the state: read it, never change it
	SentAt   time.Time
	Receives int
	Note     string // the last error reported for it
	DiedAt   time.Time
}
