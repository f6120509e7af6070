package history

import "sort"

// A keyed queue's history: what was sent, delivered and acknowledged. A
// message is known by its body (each unique), since a send whose answer
// was lost has no sequence number.

// QueueSend is one send; Seq is 0 if its answer was lost.
type QueueSend struct {
	Op   int64
	Key  string
	Body string
	Seq  uint64
}

// QueueDelivery is one message as a Receive handed it out.
type QueueDelivery struct {
	Op     int64
	Key    string
	Body   string
	Seq    uint64
	Token  uint64
	Invoke int64
}

// QueueAck is one acknowledgement that the queue answered OK.
type QueueAck struct {
	Op     int64
	Key    string
	Seq    uint64
	Token  uint64
	Return int64
}

// QueueOrder checks per-key order and exactly-once acknowledgement:
// along each key's delivery tokens (strictly increasing, one per
// delivery) sequence numbers never go back, and no message is passed over
// (every earlier message of the key sent before it was delivered first);
// no message is acknowledged twice or delivered after its ack was
// answered. With drained (the queue was received until empty after the
// run), every acknowledged send must have been delivered.
func QueueOrder(sends []QueueSend, deliveries []QueueDelivery, acks []QueueAck, drained bool) []Violation {
	var out []Violation
	byKey := map[string][]QueueDelivery{}
	delivered := map[string]bool{} // body
	for _, d := range deliveries {
		byKey[d.Key] = append(byKey[d.Key], d)
		delivered[d.Body] = true
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// Earlier messages of a key, by sequence, from the answered sends.
	sentSeqs := map[string][]QueueSend{}
	for _, s := range sends {
		if s.Seq != 0 {
			sentSeqs[s.Key] = append(sentSeqs[s.Key], s)
		}
	}
	for _, k := range keys {
		ds := byKey[k]
		sort.Slice(ds, func(i, j int) bool { return ds[i].Token < ds[j].Token })
		seen := map[uint64]bool{}
		for i, d := range ds {
			if i > 0 {
				p := ds[i-1]
				switch {
				case p.Token == d.Token:
					out = append(out, violation(CheckTokenReused, ops(p.Op, d.Op),
						"%s: delivery token %d handed out twice (sequences %d and %d)", k, d.Token, p.Seq, d.Seq))
				case d.Seq < p.Seq:
					out = append(out, violation(CheckOrder, ops(p.Op, d.Op),
						"%s: sequence %d delivered (token %d) after sequence %d (token %d)", k, d.Seq, d.Token, p.Seq, p.Token))
				}
			}
			if !seen[d.Seq] {
				for _, s := range sentSeqs[k] {
					if s.Seq < d.Seq && !seen[s.Seq] && !deliveredBefore(ds[:i], s.Seq) {
						out = append(out, violation(CheckOrder, ops(s.Op, d.Op),
							"%s: sequence %d delivered (token %d) before sequence %d, sent earlier, was ever delivered", k, d.Seq, d.Token, s.Seq))
						break
					}
				}
			}
			seen[d.Seq] = true
		}
	}
	acked := map[uint64]QueueAck{}
	for _, a := range acks {
		if o, twice := acked[a.Seq]; twice {
			out = append(out, violation(CheckAckedTwice, ops(o.Op, a.Op),
				"%s: sequence %d acknowledged twice (tokens %d and %d)", a.Key, a.Seq, o.Token, a.Token))
			continue
		}
		acked[a.Seq] = a
	}
	for _, d := range deliveries {
		if a, ok := acked[d.Seq]; ok && d.Invoke > a.Return {
			out = append(out, violation(CheckAckedTwice, ops(a.Op, d.Op),
				"%s: sequence %d delivered again (token %d) after its ack (token %d) was answered", d.Key, d.Seq, d.Token, a.Token))
		}
	}
	if drained {
		for _, s := range sends {
			if s.Seq != 0 && !delivered[s.Body] {
				out = append(out, violation(CheckLost, ops(s.Op),
					"%s: sequence %d (%q) was acknowledged as sent and never delivered", s.Key, s.Seq, s.Body))
			}
		}
	}
	return out
}

func deliveredBefore(ds []QueueDelivery, seq uint64) bool {
	for _, d := range ds {
		if d.Seq == seq {
			return true
		}
	}
	return false
}
