package server

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// The queue requests' checks, at the edge: each refusal is
// invalid_argument naming the field and its limit.

// DefaultMaxQueueBodyBytes is a message body's limit unless
// Config.MaxQueueBodyBytes says otherwise.
const DefaultMaxQueueBodyBytes = leasehold.DefaultMaxQueueBody

// defaultInFlightShow is how many deliveries in flight a queue's Get
// shows unless asked for another number. The queues' limits are the
// vocabulary's (leasehold/queues.go).
const defaultInFlightShow = 20

func queueName(q string) error {
	return leasehold.ValidateName("queue", q, leasehold.MaxResourceLen, true)
}

func queueSettings(m *pb.QueueSettings) (leasehold.QueueSettings, error) {
	var s leasehold.QueueSettings
	var err error
	if s.Visibility, err = duration("settings.visibility", m.GetVisibility(), 0); err != nil {
		return s, err
	}
	if s.Retention, err = duration("settings.retention", m.GetRetention(), 0); err != nil {
		return s, err
	}
	if s.DedupWindow, err = duration("settings.dedup_window", m.GetDedupWindow(), 0); err != nil {
		return s, err
	}
	const maxCount = 1 << 40 // more than any node holds; keeps the int conversion safe
	if m.GetMaxDepth() > maxCount || m.GetMaxBytes() > maxCount {
		return s, leasehold.Errorf(leasehold.CodeInvalid, "settings.max_depth and settings.max_bytes must be at most %d", uint64(maxCount))
	}
	s.MaxReceives, s.MaxDepth, s.MaxBytes = m.GetMaxReceives(), int(m.GetMaxDepth()), int(m.GetMaxBytes())
	s.MaxInFlightPerConsumer = int(m.GetMaxInFlightPerConsumer())
	switch m.GetDeadLetter() {
	case pb.DeadLetterMode_DEAD_LETTER_MODE_UNSPECIFIED:
	case pb.DeadLetterMode_DEAD_LETTER_MODE_SKIP:
		s.DeadLetter = leasehold.DeadLetterSkip
	case pb.DeadLetterMode_DEAD_LETTER_MODE_BLOCK:
		s.DeadLetter = leasehold.DeadLetterBlock
	default:
		return s, leasehold.Errorf(leasehold.CodeInvalid, "settings.dead_letter is %d; use DEAD_LETTER_MODE_SKIP or DEAD_LETTER_MODE_BLOCK", m.GetDeadLetter())
	}
	// The state machine fills the defaults and checks every range again;
	// check the ranges here so the message names the request's field.
	checks := []struct {
		field    string
		d        time.Duration
		min, max time.Duration
	}{
		{"settings.visibility", s.Visibility, leasehold.MinQueueVisibility, leasehold.MaxQueueVisibility},
		{"settings.retention", s.Retention, leasehold.MinQueueRetention, leasehold.MaxQueueRetention},
		{"settings.dedup_window", s.DedupWindow, leasehold.MinQueueDedupWindow, leasehold.MaxQueueDedupWindow},
	}
	for _, c := range checks {
		if c.d != 0 {
			if err := leasehold.ValidateDuration(c.field, c.d, c.min, c.max); err != nil {
				return s, err
			}
		}
	}
	if s.MaxReceives > leasehold.MaxQueueReceives {
		return s, leasehold.Errorf(leasehold.CodeInvalid, "settings.max_receives is %d; it must be between 1 and %d", s.MaxReceives, leasehold.MaxQueueReceives)
	}
	return s, nil
}

// queueMessage checks one message; field prefixes the field names
// ("" for Send, "messages[3]." for a batch).
func queueMessage(field, key string, body []byte, dedupID string, delay *durationpb.Duration, maxBody int) (leasehold.Message, error) {
	m := leasehold.Message{Key: key, Body: body, DedupID: dedupID}
	if err := leasehold.ValidateName(field+"key", key, leasehold.MaxResourceLen, true); err != nil {
		return m, err
	}
	if len(body) > maxBody {
		return m, leasehold.Errorf(leasehold.CodeInvalid, "%sbody is %d bytes; the limit is %d", field, len(body), maxBody)
	}
	if err := leasehold.ValidateName(field+"dedup_id", dedupID, leasehold.MaxResourceLen, false); err != nil {
		return m, err
	}
	var err error
	if m.Delay, err = duration(field+"delay", delay, 0); err != nil {
		return m, err
	}
	return m, leasehold.ValidateDuration(field+"delay", m.Delay, 0, leasehold.MaxQueueDelay)
}

// queueSendRequest checks a Send; its request ID, if any, becomes its
// message's dedup id in the service (a retry enqueues nothing).
func queueSendRequest(m *pb.QueuesSendRequest, maxBody int) (*service.QueueSendRequest, error) {
	if err := queueName(m.Queue); err != nil {
		return nil, err
	}
	msg, err := queueMessage("", m.Key, m.Body, m.DedupId, m.Delay, maxBody)
	if err != nil {
		return nil, err
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, err
	}
	return &service.QueueSendRequest{Queue: m.Queue, Messages: []leasehold.Message{msg}, RequestID: m.RequestId}, nil
}

func queueSendBatchRequest(m *pb.QueuesSendBatchRequest, maxBody int) (*service.QueueSendRequest, error) {
	if err := queueName(m.Queue); err != nil {
		return nil, err
	}
	if n := len(m.Messages); n == 0 || n > leasehold.MaxQueueBatch {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "messages has %d messages; a batch carries 1 to %d", n, leasehold.MaxQueueBatch)
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, err
	}
	cmd := &service.QueueSendRequest{Queue: m.Queue, Messages: make([]leasehold.Message, len(m.Messages)), RequestID: m.RequestId}
	for i, pm := range m.Messages {
		msg, err := queueMessage(indexed("messages", i), pm.GetKey(), pm.GetBody(), pm.GetDedupId(), pm.GetDelay(), maxBody)
		if err != nil {
			return nil, err
		}
		cmd.Messages[i] = msg
	}
	return cmd, nil
}

func indexed(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]." }

// note checks a free-text note (a Nack's error, an Extend's progress):
// any UTF-8, newlines included, up to leasehold.MaxQueueNoteLen bytes.
func note(field, s string) error {
	if len(s) > leasehold.MaxQueueNoteLen {
		return leasehold.Errorf(leasehold.CodeInvalid, "%s is %d bytes long; the limit is %d", field, len(s), leasehold.MaxQueueNoteLen)
	}
	if !utf8.ValidString(s) {
		return leasehold.Errorf(leasehold.CodeInvalid, "%s is not valid UTF-8", field)
	}
	return nil
}

// consumerName checks the consumer name a request gives: one of the
// caller's consumers (the service names it by the caller and the name),
// so it may not hold a "/", or a caller could pass for another's consumer.
func consumerName(name string) error {
	if err := leasehold.ValidateName("consumer", name, leasehold.MaxQueueConsumerLen, false); err != nil {
		return err
	}
	if strings.Contains(name, "/") {
		return leasehold.Errorf(leasehold.CodeInvalid, "consumer %q has a \"/\"; it names one of the caller's consumers and may not", name)
	}
	return nil
}

func queueReceiveRequest(m *pb.QueuesReceiveRequest) (*service.QueueReceiveRequest, error) {
	if err := queueName(m.Queue); err != nil {
		return nil, err
	}
	max := int(m.Max)
	switch {
	case m.Max == 0:
		max = 1
	case m.Max > leasehold.MaxQueueBatch:
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "max is %d; it must be between 1 and %d", m.Max, leasehold.MaxQueueBatch)
	}
	vis, err := duration("visibility", m.Visibility, 0)
	if err != nil {
		return nil, err
	}
	if vis != 0 {
		if err := leasehold.ValidateDuration("visibility", vis, leasehold.MinQueueVisibility, leasehold.MaxQueueVisibility); err != nil {
			return nil, err
		}
	}
	wait, err := duration("wait", m.Wait, 0)
	if err != nil {
		return nil, err
	}
	if err := leasehold.ValidateDuration("wait", wait, 0, leasehold.MaxQueueWait); err != nil {
		return nil, err
	}
	if err := consumerName(m.Consumer); err != nil {
		return nil, err
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, err
	}
	return &service.QueueReceiveRequest{Queue: m.Queue, Max: max, Visibility: vis, Wait: wait, Consumer: m.Consumer,
		RequestID: m.RequestId}, nil
}

// settler is the consumer name of who acks, nacks or extends a delivery:
// the consumer its Receive named, so only that consumer's own calls match.
// A delivery's consumer as Receive answered it (caller/name) is taken as
// its name, so a caller can send back what it was given.
func settler(caller, name string) (string, error) {
	if caller != "" {
		name = strings.TrimPrefix(name, caller+"/")
	}
	return name, consumerName(name)
}

// queueAckRequest checks one ack, as Ack and AckBatch carry it; by is the
// consumer name (settler).
func queueAckRequest(queue string, seq, token uint64, requestID string, by string) (*service.QueueAckRequest, error) {
	if err := deliveryRef(queue, seq, token); err != nil {
		return nil, err
	}
	if err := optionalRequestID(requestID); err != nil {
		return nil, err
	}
	return &service.QueueAckRequest{RequestID: requestID, Queue: queue, Sequence: seq, Token: token, Consumer: by}, nil
}

// deliveryRef checks the queue, sequence and token that name a delivery.
func deliveryRef(queue string, seq, token uint64) error {
	if err := queueName(queue); err != nil {
		return err
	}
	if seq == 0 || token == 0 {
		return leasehold.Errorf(leasehold.CodeInvalid, "sequence and token must be set: the delivery's, as Receive answered them")
	}
	return nil
}

func queueNackRequest(m *pb.QueuesNackRequest, caller string) (*service.QueueNackRequest, error) {
	if err := deliveryRef(m.Queue, m.Sequence, m.Token); err != nil {
		return nil, err
	}
	by, err := settler(caller, m.Consumer)
	if err != nil {
		return nil, err
	}
	delay, err := duration("delay", m.Delay, 0)
	if err != nil {
		return nil, err
	}
	if err := leasehold.ValidateDuration("delay", delay, 0, leasehold.MaxQueueDelay); err != nil {
		return nil, err
	}
	if err := note("error", m.Error); err != nil {
		return nil, err
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, err
	}
	return &service.QueueNackRequest{Queue: m.Queue, Sequence: m.Sequence, Token: m.Token, Delay: delay, Note: m.Error,
		Consumer: by, RequestID: m.RequestId}, nil
}

func queueExtendRequest(m *pb.QueuesExtendRequest, caller string) (*service.QueueExtendRequest, error) {
	if err := deliveryRef(m.Queue, m.Sequence, m.Token); err != nil {
		return nil, err
	}
	by, err := settler(caller, m.Consumer)
	if err != nil {
		return nil, err
	}
	vis, err := duration("visibility", m.Visibility, 0)
	if err != nil {
		return nil, err
	}
	if err := leasehold.ValidateDuration("visibility", vis, leasehold.MinQueueVisibility, leasehold.MaxQueueVisibility); err != nil {
		return nil, err
	}
	if err := note("progress", m.Progress); err != nil {
		return nil, err
	}
	return &service.QueueExtendRequest{Queue: m.Queue, Sequence: m.Sequence, Token: m.Token, Visibility: vis, Progress: m.Progress,
		Consumer: by}, nil
}

// auditReason checks an admin's reason for a purge or delete.
func auditReason(reason, actor string) error {
	if reason == "" {
		return leasehold.Errorf(leasehold.CodeInvalid,
			"reason must say why (1 to %d bytes); it is kept in the audit log", leasehold.MaxReasonLen)
	}
	if err := leasehold.ValidateName("reason", reason, leasehold.MaxReasonLen, true); err != nil {
		return err
	}
	return leasehold.ValidateName("actor", actor, leasehold.MaxOwnerLen, true)
}

// listLimit is a page size: 0 the default, at most max.
func listLimit(field string, n uint32, def, max int) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case int(n) > max:
		return 0, leasehold.Errorf(leasehold.CodeInvalid, "%s is %d; it must be between 1 and %d", field, n, max)
	}
	return int(n), nil
}
