package cliout

import (
	"github.com/leasehold/leasehold/client"

	"github.com/leasehold/leasehold/api/leasehold"
)

// The queue commands' structures. A message has one number, its
// sequence: send returns it, receive, show and dead-letters print it, and
// ack, nack and extend take it (--sequence) with the delivery's token.

// QueueSettings are a queue's settings: create, show, list.
type QueueSettings struct {
	Visibility             string `json:"visibility"`
	MaxReceives            int    `json:"max_receives"`
	Retention              string `json:"retention"`
	MaxDepth               int    `json:"max_depth"`
	MaxBytes               int    `json:"max_bytes"`
	MaxInFlightPerConsumer int    `json:"max_in_flight_per_consumer"`
	DedupWindow            string `json:"dedup_window"`
	DeadLetter             string `json:"dead_letter"` // skip or block
}

// InFlightKey is a key with a message in flight: queue show.
type InFlightKey struct {
	Key        string `json:"key"`
	Sequence   uint64 `json:"sequence"`
	Token      uint64 `json:"token"`
	Receives   int    `json:"receives"`
	Consumer   string `json:"consumer,omitempty"`
	SentAt     string `json:"sent_at,omitempty"`
	Visibility string `json:"visibility"`
}

// Queue is one queue: queue create, queue show (with the keys in flight
// and the oldest dead letters), and each of queue list.
type Queue struct {
	Queue        string        `json:"queue"`
	CreatedAt    string        `json:"created_at,omitempty"`
	Depth        int           `json:"depth"`
	InFlight     int           `json:"in_flight"`
	Dead         int           `json:"dead"`
	Bytes        int           `json:"bytes"`
	Keys         int           `json:"keys"`
	OldestAge    string        `json:"oldest_age"`
	Settings     QueueSettings `json:"settings"`
	InFlightKeys []InFlightKey `json:"in_flight_keys,omitempty"`
	DeadLetters  []DeadLetter  `json:"dead_letters,omitempty"`
}

// Queues is queue list's output.
type Queues struct {
	Queues []Queue `json:"queues"`
}

// Sent is queue send's output; Duplicate says a message with the same
// dedup id was sent within the window, and Sequence is that message's.
type Sent struct {
	Queue     string `json:"queue"`
	Key       string `json:"key"`
	Sequence  uint64 `json:"sequence"`
	Duplicate bool   `json:"duplicate"`
}

// DeliveryRecord is the JSON record of one received message, a
// leasehold.Delivery (the one delivery type; FromDeliveries writes it).
// Its sequence and token are what ack, nack and extend take. A body that
// is not UTF-8 text is given as body_base64 instead of body.
type DeliveryRecord struct {
	Queue        string  `json:"queue"`
	Key          string  `json:"key"`
	Sequence     uint64  `json:"sequence"`
	Token        uint64  `json:"token"`
	Receives     int     `json:"receives"`
	SentAt       string  `json:"sent_at,omitempty"`
	SafeDeadline string  `json:"safe_deadline,omitempty"` // the client's own deadline, before the server's
	Body         *string `json:"body,omitempty"`
	BodyBase64   []byte  `json:"body_base64,omitempty"`
}

// Received is queue receive's output: no message ready is an empty list.
type Received struct {
	Queue      string           `json:"queue"`
	Deliveries []DeliveryRecord `json:"deliveries"`
}

// Acked is queue ack's output: the message is removed.
type Acked struct {
	Queue    string `json:"queue"`
	Sequence uint64 `json:"sequence"`
	Token    uint64 `json:"token"`
}

// Nacked is queue nack's output: the message is back at its key's head,
// deliverable again after Delay.
type Nacked struct {
	Queue    string `json:"queue"`
	Sequence uint64 `json:"sequence"`
	Token    uint64 `json:"token"`
	Delay    string `json:"delay"`
}

// Extended is queue extend's output: the delivery's new safe deadline
// (the client's, before the server's).
type Extended struct {
	Queue        string `json:"queue"`
	Sequence     uint64 `json:"sequence"`
	Token        uint64 `json:"token"`
	SafeDeadline string `json:"safe_deadline"`
}

// DeadLetter is a message that was received too often: queue show,
// queue dead-letters.
type DeadLetter struct {
	Sequence   uint64  `json:"sequence"`
	Key        string  `json:"key"`
	Receives   int     `json:"receives"`
	Note       string  `json:"note,omitempty"` // the last nack's error
	SentAt     string  `json:"sent_at,omitempty"`
	DiedAt     string  `json:"died_at,omitempty"`
	Body       *string `json:"body,omitempty"`
	BodyBase64 []byte  `json:"body_base64,omitempty"`
}

// DeadLetters is queue dead-letters' output.
type DeadLetters struct {
	Queue       string       `json:"queue"`
	DeadLetters []DeadLetter `json:"dead_letters"`
}

// Purged is queue purge's output.
type Purged struct {
	Queue   string `json:"queue"`
	Dropped int    `json:"dropped"`
}

// Redriven is queue redrive's output.
type Redriven struct {
	Queue string `json:"queue"`
	Moved int    `json:"moved"`
}

// QueueDeleted is queue delete's output.
type QueueDeleted struct {
	Queue   string `json:"queue"`
	Deleted bool   `json:"deleted"`
}

// FromQueue is q as printed.
func FromQueue(q client.QueueInfo) Queue {
	s := q.Settings
	out := Queue{Queue: q.Name, CreatedAt: Time(q.CreatedAt), Depth: q.Depth, InFlight: q.InFlight, Dead: q.Dead,
		Bytes: q.Bytes, Keys: q.Keys, OldestAge: Dur(q.OldestAge),
		Settings: QueueSettings{Visibility: Dur(s.Visibility), MaxReceives: s.MaxReceives, Retention: Dur(s.Retention),
			MaxDepth: s.MaxDepth, MaxBytes: s.MaxBytes, MaxInFlightPerConsumer: s.MaxInFlightPerConsumer,
			DedupWindow: Dur(s.DedupWindow), DeadLetter: s.DeadLetter}}
	for _, k := range q.InFlightKeys {
		out.InFlightKeys = append(out.InFlightKeys, InFlightKey{Key: k.Key, Sequence: k.Sequence, Token: k.Token,
			Receives: k.Receives, Consumer: k.Consumer, SentAt: Time(k.SentAt), Visibility: Dur(k.Visibility)})
	}
	return out
}

// FromQueues is queue list's output.
func FromQueues(qs []client.QueueInfo) Queues {
	out := Queues{Queues: []Queue{}}
	for _, q := range qs {
		out.Queues = append(out.Queues, FromQueue(q))
	}
	return out
}

// FromDeliveries is queue receive's output.
func FromDeliveries(queue string, ds []leasehold.Delivery) Received {
	out := Received{Queue: queue, Deliveries: []DeliveryRecord{}}
	for _, d := range ds {
		o := DeliveryRecord{Queue: d.Queue, Key: d.Key, Sequence: d.Sequence, Token: d.Token, Receives: d.Receives,
			SentAt: Time(d.SentAt), SafeDeadline: Time(d.Deadline)}
		o.Body, o.BodyBase64 = Value(d.Body)
		out.Deliveries = append(out.Deliveries, o)
	}
	return out
}

// FromDeadLetters is the dead letters of queue.
func FromDeadLetters(queue string, dead []leasehold.DeadLetter) DeadLetters {
	out := DeadLetters{Queue: queue, DeadLetters: []DeadLetter{}}
	for _, d := range dead {
		o := DeadLetter{Sequence: d.Sequence, Key: d.Key, Receives: d.Receives, Note: d.Note,
			SentAt: Time(d.SentAt), DiedAt: Time(d.DiedAt)}
		o.Body, o.BodyBase64 = Value(d.Body)
		out.DeadLetters = append(out.DeadLetters, o)
	}
	return out
}
