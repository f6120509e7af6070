package main

import (
	"encoding/json"
	"io"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/client"
)

// The queue commands' JSON output: one plain struct per output, printed
// by printOut, in the shared conventions (snake_case names, numbers for
// ids, tokens and counts, RFC 3339 UTC times with milliseconds, Go
// duration strings).

// printOut prints v as indented JSON.
func printOut(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonTime is a time as "2026-12-01T09:00:00.123Z"; a zero time is left
// out (omitzero), as a field the server did not set.
type jsonTime time.Time

func (t jsonTime) IsZero() bool { return time.Time(t).IsZero() }

func (t jsonTime) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Time(t).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// jsonDuration is a duration as a Go duration string rounded to the
// millisecond ("1m30.5s").
type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Round(time.Millisecond).String())
}

type queueSettingsOut struct {
	Visibility             jsonDuration `json:"visibility"`
	MaxReceives            int          `json:"max_receives"`
	Retention              jsonDuration `json:"retention"`
	MaxDepth               int          `json:"max_depth"`
	MaxBytes               int          `json:"max_bytes"`
	MaxInFlightPerConsumer int          `json:"max_in_flight_per_consumer"`
	DedupWindow            jsonDuration `json:"dedup_window"`
	DeadLetter             string       `json:"dead_letter"`
}

type inFlightOut struct {
	Key        string       `json:"key"`
	DeliveryID uint64       `json:"delivery_id"`
	Token      uint64       `json:"token"`
	Receives   int          `json:"receives"`
	Consumer   string       `json:"consumer"`
	SentAt     jsonTime     `json:"sent_at,omitzero"`
	Visibility jsonDuration `json:"visibility"`
}

type queueOut struct {
	Queue     string           `json:"queue"`
	CreatedAt jsonTime         `json:"created_at,omitzero"`
	Depth     int              `json:"depth"`
	InFlight  int              `json:"in_flight"`
	Dead      int              `json:"dead"`
	Bytes     int              `json:"bytes"`
	Keys      int              `json:"keys"`
	OldestAge jsonDuration     `json:"oldest_age"`
	Settings  queueSettingsOut `json:"settings"`
	// show only: the keys with a message in flight, slowest first, and
	// the oldest dead letters.
	InFlightKeys []inFlightOut   `json:"in_flight_keys,omitempty"`
	DeadLetters  []deadLetterOut `json:"dead_letters,omitempty"`
}

func queueOutOf(q client.QueueInfo) queueOut {
	s := q.Settings
	out := queueOut{Queue: q.Name, CreatedAt: jsonTime(q.CreatedAt), Depth: q.Depth, InFlight: q.InFlight, Dead: q.Dead,
		Bytes: q.Bytes, Keys: q.Keys, OldestAge: jsonDuration(q.OldestAge),
		Settings: queueSettingsOut{Visibility: jsonDuration(s.Visibility), MaxReceives: s.MaxReceives,
			Retention: jsonDuration(s.Retention), MaxDepth: s.MaxDepth, MaxBytes: s.MaxBytes,
			MaxInFlightPerConsumer: s.MaxInFlightPerConsumer, DedupWindow: jsonDuration(s.DedupWindow), DeadLetter: s.DeadLetter}}
	for _, k := range q.InFlightKeys {
		out.InFlightKeys = append(out.InFlightKeys, inFlightOut{Key: k.Key, DeliveryID: k.Sequence, Token: k.Token,
			Receives: k.Receives, Consumer: k.Consumer, SentAt: jsonTime(k.SentAt), Visibility: jsonDuration(k.Visibility)})
	}
	return out
}

type sentOut struct {
	Queue     string `json:"queue"`
	Key       string `json:"key"`
	Sequence  uint64 `json:"sequence"`
	Duplicate bool   `json:"duplicate"`
}

// deliveryOut is one received message. Its delivery_id (the message's
// sequence) and token are what ack, nack and extend take. A body that is
// not UTF-8 text is given as body_base64 instead of body.
type deliveryOut struct {
	Queue        string   `json:"queue"`
	Key          string   `json:"key"`
	DeliveryID   uint64   `json:"delivery_id"`
	Sequence     uint64   `json:"sequence"`
	Token        uint64   `json:"token"`
	Receives     int      `json:"receives"`
	SentAt       jsonTime `json:"sent_at,omitzero"`
	SafeDeadline jsonTime `json:"safe_deadline,omitzero"` // the client's own deadline, before the server's
	Body         *string  `json:"body,omitempty"`
	BodyBase64   []byte   `json:"body_base64,omitempty"`
}

func deliveryOutOf(d client.Delivery) deliveryOut {
	out := deliveryOut{Queue: d.Queue, Key: d.Key, DeliveryID: d.Sequence, Sequence: d.Sequence, Token: d.Token,
		Receives: d.Receives, SentAt: jsonTime(d.SentAt), SafeDeadline: jsonTime(d.Deadline)}
	setBody(d.Body, &out.Body, &out.BodyBase64)
	return out
}

type receiveOut struct {
	Queue      string        `json:"queue"`
	Deliveries []deliveryOut `json:"deliveries"`
}

type deadLetterOut struct {
	Sequence   uint64   `json:"sequence"`
	Key        string   `json:"key"`
	Receives   int      `json:"receives"`
	Note       string   `json:"note"`
	SentAt     jsonTime `json:"sent_at,omitzero"`
	DiedAt     jsonTime `json:"died_at,omitzero"`
	Body       *string  `json:"body,omitempty"`
	BodyBase64 []byte   `json:"body_base64,omitempty"`
}

func deadLetterOutOf(d client.DeadLetter) deadLetterOut {
	out := deadLetterOut{Sequence: d.Sequence, Key: d.Key, Receives: d.Receives, Note: d.Note,
		SentAt: jsonTime(d.SentAt), DiedAt: jsonTime(d.DiedAt)}
	setBody(d.Body, &out.Body, &out.BodyBase64)
	return out
}

type deadLettersOut struct {
	Queue       string          `json:"queue"`
	DeadLetters []deadLetterOut `json:"dead_letters"`
}

// countOut answers purge (dropped) and redrive (moved).
type countOut struct {
	Queue   string `json:"queue"`
	Dropped *int   `json:"dropped,omitempty"`
	Moved   *int   `json:"moved,omitempty"`
}

// setBody puts b as text if it is UTF-8, else as base64.
func setBody(b []byte, text **string, b64 *[]byte) {
	if utf8.Valid(b) {
		s := string(b)
		*text = &s
		return
	}
	*b64 = b
}
