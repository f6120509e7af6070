package history

import "testing"

func TestQueueOrderCaught(t *testing.T) {
	sends := []QueueSend{{Op: 1, Key: "k", Body: "a", Seq: 1}, {Op: 2, Key: "k", Body: "b", Seq: 2}, {Op: 3, Key: "k", Body: "c", Seq: 3}}
	d := func(op int64, body string, seq, token uint64, invoke int64) QueueDelivery {
		return QueueDelivery{Op: op, Key: "k", Body: body, Seq: seq, Token: token, Invoke: invoke}
	}
	ack := func(op int64, seq, token uint64, ret int64) QueueAck {
		return QueueAck{Op: op, Key: "k", Seq: seq, Token: token, Return: ret}
	}
	for _, tc := range []struct {
		name       string
		deliveries []QueueDelivery
		acks       []QueueAck
		want       string
	}{
		{"in order, once", []QueueDelivery{d(4, "a", 1, 10, 0), d(6, "b", 2, 12, 30), d(8, "c", 3, 14, 60)},
			[]QueueAck{ack(5, 1, 10, 20), ack(7, 2, 12, 50), ack(9, 3, 14, 80)}, ""},
		{"redelivered before its ack: fine", []QueueDelivery{d(4, "a", 1, 10, 0), d(5, "a", 1, 11, 30), d(6, "b", 2, 12, 60), d(8, "c", 3, 14, 90)},
			[]QueueAck{ack(7, 1, 11, 50)}, ""},
		{"back in sequence", []QueueDelivery{d(4, "a", 1, 10, 0), d(6, "b", 2, 12, 30), d(8, "a", 1, 14, 60), d(9, "c", 3, 15, 90)}, nil, CheckOrder},
		{"passed over", []QueueDelivery{d(4, "a", 1, 10, 0), d(6, "c", 3, 12, 30), d(8, "b", 2, 14, 60)}, nil, CheckOrder},
		{"token twice", []QueueDelivery{d(4, "a", 1, 10, 0), d(6, "b", 2, 10, 30), d(8, "c", 3, 14, 60)}, nil, CheckTokenReused},
		{"acked twice", []QueueDelivery{d(4, "a", 1, 10, 0), d(5, "a", 1, 11, 10), d(6, "b", 2, 12, 60), d(8, "c", 3, 14, 90)},
			[]QueueAck{ack(7, 1, 10, 20), ack(7, 1, 11, 30)}, CheckAckedTwice},
		{"delivered after its ack", []QueueDelivery{d(4, "a", 1, 10, 0), d(6, "a", 1, 12, 30), d(7, "b", 2, 13, 60), d(8, "c", 3, 14, 90)},
			[]QueueAck{ack(5, 1, 10, 20)}, CheckAckedTwice},
		{"lost", []QueueDelivery{d(4, "a", 1, 10, 0), d(6, "b", 2, 12, 30)}, nil, CheckLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := QueueOrder(sends, tc.deliveries, tc.acks, true)
			assertCaught(t, got, tc.want)
		})
	}
}

func TestIdemOnceCaught(t *testing.T) {
	for _, tc := range []struct {
		name      string
		completes []IdemComplete
		answers   []IdemAnswer
		want      string
	}{
		{"once", []IdemComplete{{Op: 1, Key: "k", Token: 5, Result: "r5"}, {Op: 2, Key: "k", Token: 9, Result: "r9", Unknown: true}},
			[]IdemAnswer{{Op: 3, Key: "k", Result: "r5"}}, ""},
		{"a lost answer's result", []IdemComplete{{Op: 1, Key: "k", Token: 5, Result: "r5", Unknown: true}},
			[]IdemAnswer{{Op: 3, Key: "k", Result: "r5"}}, ""},
		{"twice", []IdemComplete{{Op: 1, Key: "k", Token: 5, Result: "r5"}, {Op: 2, Key: "k", Token: 9, Result: "r9"}}, nil, CheckCompletedTwice},
		{"another result answered", []IdemComplete{{Op: 1, Key: "k", Token: 5, Result: "r5"}, {Op: 2, Key: "k", Token: 9, Result: "r9", Unknown: true}},
			[]IdemAnswer{{Op: 3, Key: "k", Result: "r9"}}, CheckCompletedTwice},
		{"a result nobody sent", nil, []IdemAnswer{{Op: 3, Key: "k", Result: "r1"}}, CheckCompletedTwice},
	} {
		t.Run(tc.name, func(t *testing.T) { assertCaught(t, IdemOnce(tc.completes, tc.answers), tc.want) })
	}
}

// assertCaught: no violation if want is "", else one of check want.
func assertCaught(t *testing.T, got []Violation, want string) {
	t.Helper()
	if want == "" {
		if len(got) > 0 {
			t.Errorf("a good history was refused: %v", got)
		}
		return
	}
	for _, v := range got {
		if v.Check == want {
			return
		}
	}
	t.Errorf("not caught (want %s): %v", want, got)
}
