package history

import (
	"strings"
	"testing"
	"time"
)

// TestExclusionCaught feeds the window check made-up holds, each breaking
// one rule, and one history that keeps them all.
func TestExclusionCaught(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	var lease uint64
	hold := func(token uint64, sent, ack, end int64, released bool) Hold {
		lease++ // each hold a lease of its own
		return Hold{Resource: "r", Owner: "c", Token: token, Lease: lease, Sent: sent, Ack: ack, LastOK: sent, End: end,
			TTL: time.Second, Released: released}
	}
	twice := func(h Hold) []Hold { return []Hold{h, h} }
	for _, tc := range []struct {
		name  string
		holds []Hold
		want  string // a check's name; "" for none
	}{
		{"fine", []Hold{hold(5, 0, ms(10), ms(100), true), hold(9, ms(50), ms(120), ms(200), true)}, ""},
		{"token issued twice", []Hold{hold(5, 0, ms(10), ms(100), true), hold(5, ms(150), ms(160), ms(200), true)}, CheckTokenReused},
		{"tokens against real time", []Hold{hold(9, 0, ms(10), ms(100), true), hold(5, ms(150), ms(160), ms(200), true)}, CheckTokenReused},
		{"overlap", []Hold{hold(5, 0, ms(10), ms(100), true), hold(9, ms(20), ms(50), ms(200), true)}, CheckOverlap},
		{"lapsed before its TTL", []Hold{hold(5, 0, ms(10), ms(100), false), hold(9, ms(300), ms(400), ms(500), true)}, CheckTTL},
		{"token 0", []Hold{hold(0, 0, ms(10), ms(100), true)}, CheckBadRecord},
		{"one hold recorded twice", twice(hold(5, 0, ms(10), ms(100), true)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Exclusion(tc.holds)
			var checks []string
			for _, v := range got {
				checks = append(checks, v.Check)
			}
			all := strings.Join(checks, ",")
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("a good history was refused: %v", got)
			case tc.want != "" && !strings.Contains(all, tc.want):
				t.Errorf("not caught (want %s): %v", tc.want, got)
			}
		})
	}
}
