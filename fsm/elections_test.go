package fsm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/api/leasehold"
)

// campaign is acq(id, name) as a campaign with value, waiting a minute.
func campaign(id, name, value string) *Campaign {
	return &Campaign{Acquire: *wacq(id, name), Value: []byte(value)}
}

func leaderLines(evs []Event) []string {
	var out []string
	for _, e := range evs {
		if e.Kind == EventLeaderChanged {
			out = append(out, fmt.Sprintf("%d %s lease=%d token=%d value=%s", e.Index, e.Resources[0], e.LeaseID, e.Token, e.Value))
		}
	}
	return out
}

func TestElectionTerms(t *testing.T) {
	h2 := newHarness(t)
	evs := &eventLog{}
	h2.s.SetObserver(evs)
	r := h2.one(campaign("c1", "e", "one"))
	if r.Lease == nil {
		t.Fatalf("first campaign: %s %v", summarize(r), r.Err)
	}
	lead := r.Lease
	if r := h2.one(campaign("c2", "e", "two")); !r.Queued {
		t.Fatalf("second campaign: %s, want queued", summarize(r))
	}
	if r := h2.one(&Proclaim{LeaseID: lead.ID, SecretHash: secret("c1"), Value: []byte("one'")}); r.Err != nil {
		t.Fatalf("proclaim: %v", r.Err)
	}
	if e, ok := h2.s.Leader("e"); !ok || string(e.Value) != "one'" || e.LeaseID != lead.ID || e.Candidates != 1 {
		t.Fatalf("leader after proclaim: %+v %v", e, ok)
	}
	h2.one(release(lead, "c1")) // c2 leads in the same entry
	next, _ := h2.s.Leader("e")
	h2.one(&Expire{LeaseID: next.LeaseID})
	want := []string{
		"1 e lease=1 token=1 value=one",
		"3 e lease=1 token=1 value=one'",
		"4 e lease=4 token=4 value=two",
		"5 e lease=0 token=0 value=",
	}
	if got := leaderLines(evs.ev); !slices.Equal(got, want) {
		t.Fatalf("leader events:\n got %q\nwant %q", got, want)
	}
	if _, ok := h2.s.Leader("e"); ok || len(h2.s.Elections("")) != 0 {
		t.Fatal("an election with no leader and no candidates is still listed")
	}
}

func TestElectionRefusals(t *testing.T) {
	h := newHarness(t)
	lead := h.one(campaign("c1", "e", "v")).Lease
	g := acq("g", "lock")
	g.LockDelay = time.Minute
	lock := h.mustGrant(g)
	h.mustQueue(wacq("w", "lock"))
	big := campaign("c9", "f", strings.Repeat("x", MaxElectionValue+1))
	two := campaign("c8", "f", "v")
	two.Resources = []string{"f", "g"}
	for _, tc := range []struct {
		name string
		c    Command
		code leasehold.Code
		msg  string
	}{
		{"lock on an election", acq("x", "e"), leasehold.CodeInvalid, "is an election"},
		{"lock on an election among others", acq("x2", "zz", "e"), leasehold.CodeInvalid, "is an election"},
		{"campaign on a held lock", campaign("c2", "lock", "v"), leasehold.CodeInvalid, "as a lock"},
		{"value too large", big, leasehold.CodeInvalid, "election value"},
		{"two names", two, leasehold.CodeInvalid, "one election"},
		{"proclaim by a non-holder", &Proclaim{LeaseID: lead.ID, SecretHash: secret("nope"), Value: []byte("v")}, leasehold.CodeNotHolder, "secret"},
		{"proclaim with a lock", &Proclaim{LeaseID: lock.ID, SecretHash: secret("g")}, leasehold.CodeInvalid, "not an election"},
		{"proclaim too large", &Proclaim{LeaseID: lead.ID, SecretHash: secret("c1"), Value: big.Value}, leasehold.CodeInvalid, "election value"},
	} {
		r := h.one(tc.c)
		wantCode(t, tc.name, r, tc.code)
		if !strings.Contains(r.Err.Error(), tc.msg) {
			t.Errorf("%s: %q does not say %q", tc.name, r.Err, tc.msg)
		}
	}
	// A lock only awaited (its holder expired into a lock-delay) still
	// refuses a campaign.
	h.one(&Expire{LeaseID: lock.ID})
	if _, held := h.s.Holder("lock"); held || len(h.queue("lock")) != 1 {
		t.Fatal("setup: want the lock free, in lock-delay, with its waiter")
	}
	wantCode(t, "campaign on an awaited lock", h.one(campaign("c3", "lock", "v")), leasehold.CodeInvalid)
	if e, ok := h.s.Leader("e"); !ok || string(e.Value) != "v" {
		t.Fatalf("refusals touched the election: %+v", e)
	}
}

func TestElectionSurvivesSnapshot(t *testing.T) {
	h := newHarness(t)
	lead := h.one(campaign("c1", "e", "one")).Lease
	h.one(campaign("c2", "e", "two"))
	s2, err := Restore(h.s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := h.s.Leader("e")
	if got, ok := s2.Leader("e"); !ok || string(got.Value) != "one" || got.Candidates != 1 || got.Token != want.Token {
		t.Fatalf("restored election %+v, want %+v", got, want)
	}
	evs := &eventLog{}
	s2.SetObserver(evs)
	s2.Apply(h.ix+1, &Batch{Time: h.now, Cmds: []Command{release(lead, "c1")}})
	if got := leaderLines(evs.ev); len(got) != 1 || !strings.HasSuffix(got[0], "value=two") {
		t.Fatalf("restored waiter's campaign lost its value: %q", got)
	}
}

// For random campaigns, releases, expiries, withdrawals and proclaims on
// two elections: at most one leader per election at any index, the
// LeaderChanged events say who it is, and terms' tokens strictly increase.
func TestPropertyElections(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		evs := &eventLog{}
		s := New(DefaultConfig(), evs)
		names := []string{"e1", "e2"}
		leader := map[string]uint64{}   // per the events
		lastTerm := map[string]uint64{} // last leader token per election
		var ids []string
		for ix := uint64(1); ix <= 60; ix++ {
			var c Command
			id := fmt.Sprint("c", ix)
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0, 1:
				c = campaign(id, rapid.SampledFrom(names).Draw(t, "name"), id)
				ids = append(ids, id)
			case 2:
				if len(ids) == 0 {
					continue
				}
				who := rapid.SampledFrom(ids).Draw(t, "who")
				l := s.leaseByKey(keyOf(who))
				if l == 0 {
					c = &Cancel{Key: keyOf(who)}
				} else if rapid.Bool().Draw(t, "expire") {
					c = &Expire{LeaseID: l, RenewCount: 0}
				} else {
					c = &Release{LeaseID: l, SecretHash: secret(who)}
				}
			case 3:
				if len(ids) == 0 {
					continue
				}
				who := rapid.SampledFrom(ids).Draw(t, "proclaimer")
				c = &Proclaim{LeaseID: s.leaseByKey(keyOf(who)), SecretHash: secret(who), Value: []byte("p" + id)}
			case 4:
				if len(ids) == 0 {
					continue
				}
				c = &WaitTimeout{Key: keyOf(rapid.SampledFrom(ids).Draw(t, "timeout"))}
			}
			evs.ev = nil
			s.Apply(ix, &Batch{Time: int64(ix), Cmds: []Command{c}})
			for _, e := range evs.ev {
				if e.Kind != EventLeaderChanged {
					continue
				}
				name := e.Resources[0]
				if e.LeaseID != 0 && leader[name] != 0 && leader[name] != e.LeaseID {
					if ended := slices.ContainsFunc(evs.ev, func(x Event) bool {
						return x.LeaseID == leader[name] && (x.Kind == EventReleased || x.Kind == EventExpired)
					}); !ended {
						t.Fatalf("entry %d: %s has leader %d while %d still leads", ix, name, e.LeaseID, leader[name])
					}
				}
				if e.LeaseID != 0 && e.LeaseID != leader[name] {
					if e.Token <= lastTerm[name] {
						t.Fatalf("entry %d: %s term token %d after %d", ix, name, e.Token, lastTerm[name])
					}
					lastTerm[name] = e.Token
				}
				leader[name] = e.LeaseID
			}
			for _, name := range names {
				got, ok := s.Leader(name)
				if !ok {
					got = Election{}
				}
				if got.LeaseID != leader[name] {
					t.Fatalf("entry %d: %s is led by %d, the events say %d", ix, name, got.LeaseID, leader[name])
				}
			}
		}
	})
}

// leaseByKey is the live lease granted to the acquire with this key, or 0.
func (s *State) leaseByKey(key string) uint64 {
	for id, l := range s.leases.byID.all() {
		if l.key == key {
			return id
		}
	}
	return 0
}
