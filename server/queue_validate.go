package server

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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
const DefaultMaxQueueBodyBytes = 256 << 10

// Queue request limits.
const (
	MaxQueueDelay       = 15 * time.Minute
	MinQueueVisibility  = time.Second
	MaxQueueVisibility  = 12 * time.Hour
	MaxQueueNoteLen     = 1 << 10 // a Nack's error, an Extend's progress
	MaxQueueConsumerLen = 128
	defaultInFlightShow = 20
)

func queueName(q string) error {
	return leasehold.ValidateName("queue", q, leasehold.MaxResourceLen, true)
}

func queueSettings(m *pb.QueueSettings) (service.QueueSettings, error) {
	var s service.QueueSettings
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
		s.DeadLetter = service.DeadLetterSkip
	case pb.DeadLetterMode_DEAD_LETTER_MODE_BLOCK:
		s.DeadLetter = service.DeadLetterBlock
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
		{"settings.visibility", s.Visibility, MinQueueVisibility, MaxQueueVisibility},
		{"settings.retention", s.Retention, time.Minute, 14 * 24 * time.Hour},
		{"settings.dedup_window", s.DedupWindow, time.Second, 24 * time.Hour},
	}
	for _, c := range checks {
		if c.d != 0 {
			if err := leasehold.ValidateDuration(c.field, c.d, c.min, c.max); err != nil {
				return s, err
			}
		}
	}
	if s.MaxReceives > 1000 {
		return s, leasehold.Errorf(leasehold.CodeInvalid, "settings.max_receives is %d; it must be between 1 and 1000", s.MaxReceives)
	}
	return s, nil
}

// queueMessage checks one message; field prefixes the field names
// ("" for Send, "messages[3]." for a batch).
func queueMessage(field, key string, body []byte, dedupID string, delay *durationpb.Duration, maxBody int) (service.QueueMessage, error) {
	m := service.QueueMessage{Key: key, Body: body, DedupID: dedupID}
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
	return m, leasehold.ValidateDuration(field+"delay", m.Delay, 0, MaxQueueDelay)
}

// requestDedupID turns a Send's request ID into the dedup id of its
// message i of n, scoped to the caller: a retry of the same request
// enqueues nothing within the queue's dedup window. It starts with a zero
// byte, which a caller's dedup id (printable) never has. After the
// request's part comes the message's fingerprint (n, key, body, delay),
// so that the state machine refuses the request ID reused for another
// message instead of answering it as a duplicate (fsm.RequestDedupPart).
func requestDedupID(caller, requestID string, i, n int, m service.QueueMessage) string {
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(caller))))
	h.Write([]byte(caller))
	h.Write(binary.AppendUvarint(nil, uint64(i)))
	h.Write([]byte(requestID))
	f := sha256.New()
	f.Write(binary.AppendUvarint(nil, uint64(n)))
	f.Write(binary.AppendUvarint(nil, uint64(len(m.Key))))
	f.Write([]byte(m.Key))
	f.Write(binary.AppendVarint(nil, int64(m.Delay)))
	f.Write(m.Body)
	return "\x00" + hex.EncodeToString(h.Sum(nil)[:16]) + ":" + hex.EncodeToString(f.Sum(nil)[:8])
}

func queueSendCommand(m *pb.QueuesSendRequest, caller string, maxBody int) (*service.QueueSend, error) {
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
	if msg.DedupID == "" && m.RequestId != "" {
		msg.DedupID = requestDedupID(caller, m.RequestId, 0, 1, msg)
	}
	return &service.QueueSend{Queue: m.Queue, Messages: []service.QueueMessage{msg}, Caller: caller}, nil
}

func queueSendBatchCommand(m *pb.QueuesSendBatchRequest, caller string, maxBody int) (*service.QueueSend, error) {
	if err := queueName(m.Queue); err != nil {
		return nil, err
	}
	if n := len(m.Messages); n == 0 || n > service.MaxQueueBatch {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "messages has %d messages; a batch carries 1 to %d", n, service.MaxQueueBatch)
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, err
	}
	cmd := &service.QueueSend{Queue: m.Queue, Messages: make([]service.QueueMessage, len(m.Messages)), Caller: caller}
	for i, pm := range m.Messages {
		msg, err := queueMessage(indexed("messages", i), pm.GetKey(), pm.GetBody(), pm.GetDedupId(), pm.GetDelay(), maxBody)
		if err != nil {
			return nil, err
		}
		if msg.DedupID == "" && m.RequestId != "" {
			msg.DedupID = requestDedupID(caller, m.RequestId, i, len(m.Messages), msg)
		}
		cmd.Messages[i] = msg
	}
	return cmd, nil
}

func indexed(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]." }

// note checks a free-text note (a Nack's error, an Extend's progress):
// any UTF-8, newlines included, up to MaxQueueNoteLen bytes.
func note(field, s string) error {
	if len(s) > MaxQueueNoteLen {
		return leasehold.Errorf(leasehold.CodeInvalid, "%s is %d bytes long; the limit is %d", field, len(s), MaxQueueNoteLen)
	}
	if !utf8.ValidString(s) {
		return leasehold.Errorf(leasehold.CodeInvalid, "%s is not valid UTF-8", field)
	}
	return nil
}

// consumerID names a Receive's consumer: the authenticated caller and the
// consumer name the request gives, which may not hold a "/" (so that no
// caller can pass for another's consumer).
func consumerID(caller, name string) (string, error) {
	if err := leasehold.ValidateName("consumer", name, MaxQueueConsumerLen, false); err != nil {
		return "", err
	}
	if strings.Contains(name, "/") {
		return "", leasehold.Errorf(leasehold.CodeInvalid, "consumer %q has a \"/\"; it names one of the caller's consumers and may not", name)
	}
	if caller == "" {
		return name, nil
	}
	return caller + "/" + name, nil
}

func queueReceiveCommand(m *pb.QueuesReceiveRequest, caller string) (*service.QueueReceive, time.Duration, error) {
	if err := queueName(m.Queue); err != nil {
		return nil, 0, err
	}
	max := int(m.Max)
	switch {
	case m.Max == 0:
		max = 1
	case m.Max > service.MaxQueueBatch:
		return nil, 0, leasehold.Errorf(leasehold.CodeInvalid, "max is %d; it must be between 1 and %d", m.Max, service.MaxQueueBatch)
	}
	vis, err := duration("visibility", m.Visibility, 0)
	if err != nil {
		return nil, 0, err
	}
	if vis != 0 {
		if err := leasehold.ValidateDuration("visibility", vis, MinQueueVisibility, MaxQueueVisibility); err != nil {
			return nil, 0, err
		}
	}
	wait, err := duration("wait", m.Wait, 0)
	if err != nil {
		return nil, 0, err
	}
	if err := leasehold.ValidateDuration("wait", wait, 0, service.MaxQueueWait); err != nil {
		return nil, 0, err
	}
	consumer, err := consumerID(caller, m.Consumer)
	if err != nil {
		return nil, 0, err
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, 0, err
	}
	return &service.QueueReceive{Queue: m.Queue, Max: max, Visibility: vis, Caller: consumer, RequestID: m.RequestId}, wait, nil
}

// settler is who acks, nacks or extends a delivery: the consumer its
// Receive named, made the same way, so only that consumer's own calls match.
// A delivery's consumer as Receive answered it (caller/name) is taken as
// its name, so a caller can send back what it was given.
func settler(caller, name string) (service.Settler, error) {
	if caller != "" {
		name = strings.TrimPrefix(name, caller+"/")
	}
	consumer, err := consumerID(caller, name)
	return service.Settler{Consumer: consumer, Bound: true}, err
}

// queueAckCommand checks one ack, as Ack and AckBatch carry it.
func queueAckCommand(queue string, seq, token uint64, requestID string, by service.Settler, caller string) (*service.QueueAck, error) {
	if err := deliveryRef(queue, seq, token); err != nil {
		return nil, err
	}
	if err := optionalRequestID(requestID); err != nil {
		return nil, err
	}
	return &service.QueueAck{RequestID: requestID, Queue: queue, Seq: seq, Token: token, Caller: caller, Settler: by}, nil
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

func queueNackCommand(m *pb.QueuesNackRequest, caller string) (*service.QueueNack, error) {
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
	if err := leasehold.ValidateDuration("delay", delay, 0, MaxQueueDelay); err != nil {
		return nil, err
	}
	if err := note("error", m.Error); err != nil {
		return nil, err
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, err
	}
	return &service.QueueNack{Queue: m.Queue, Seq: m.Sequence, Token: m.Token, Delay: delay, Note: m.Error, Settler: by,
		RequestID: m.RequestId}, nil
}

func queueExtendCommand(m *pb.QueuesExtendRequest, caller string) (*service.QueueExtend, error) {
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
	if err := leasehold.ValidateDuration("visibility", vis, MinQueueVisibility, MaxQueueVisibility); err != nil {
		return nil, err
	}
	if err := note("progress", m.Progress); err != nil {
		return nil, err
	}
	return &service.QueueExtend{Queue: m.Queue, Seq: m.Sequence, Token: m.Token, Visibility: vis, Progress: m.Progress, Settler: by}, nil
}

// auditReason checks an admin's reason for a purge or delete.
func auditReason(reason, actor string) error {
	if reason == "" {
		return leasehold.Errorf(leasehold.CodeInvalid,
			"reason must say why (1 to %d bytes); it is kept in the audit log", service.MaxReasonLen)
	}
	if err := leasehold.ValidateName("reason", reason, service.MaxReasonLen, true); err != nil {
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
