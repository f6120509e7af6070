package fsm

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A model test of idempotency keys: several callers Begin, Complete and
// Abandon on a few keys with a few payloads, while attempt leases lapse
// and retention runs out, in random order. After every step the state
// equals the model, and the properties the issue names hold: at most one
// attempt owns a key, a completed key answers the same result until it is
// forgotten, a stale attempt never completes, and a mismatched fingerprint
// is always refused.

type mIdem struct {
	fp        string
	token     uint64 // the attempt in progress, or the completed one
	secret    string
	completed bool
	result    string
}

// mAttempt is what a caller remembers of an attempt it started.
type mAttempt struct {
	key    string
	token  uint64
	secret string
}

func TestIdemModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		timed := newTimedObserver()
		s := New(DefaultConfig(), timed)
		var capt capturing
		defer capt.done(rt)
		ix, now := uint64(0), t0
		apply := func(c Command) Result {
			ix++
			now += int64(time.Second)
			return s.Apply(ix, &Batch{Time: now, Cmds: []Command{c}})[0]
		}
		keys := []string{"pay/1", "pay/2", "other"}
		fps := []string{"body-a", "body-b"}
		model := map[string]*mIdem{}
		var attempts []mAttempt // every attempt any caller started, stale ones too
		nsecret := 0

		steps := rapid.IntRange(1, 80).Draw(rt, "steps")
		for range steps {
			key := rapid.SampledFrom(keys).Draw(rt, "key")
			m := model[key]
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1: // Begin by a new caller (a new secret)
				fp := rapid.SampledFrom(fps).Draw(rt, "fp")
				nsecret++
				sec := fmt.Sprint("s", nsecret)
				r := apply(&IdemBegin{Key: key, Fingerprint: secret(fp), Owner: "o", TTL: 10 * time.Second,
					SecretHash: secret(sec), Caller: "c"})
				switch {
				case m != nil && m.fp != fp:
					if leasehold.CodeOf(r.Err) != leasehold.CodeNotHolder {
						rt.Fatalf("begin %s with another fingerprint: %v, want a refusal", key, r.Err)
					}
					for _, f := range fps {
						if bytes.Contains([]byte(r.Err.Error()), []byte(f)) {
							rt.Fatalf("the mismatch message shows a payload: %v", r.Err)
						}
					}
				case m != nil && m.completed:
					if r.Err != nil || r.Idem().State != IdemCompleted || string(r.Idem().Result) != m.result || r.Idem().Token != m.token {
						rt.Fatalf("begin %s on a completed key: %+v %v, want result %q token %d", key, r.Idem(), r.Err, m.result, m.token)
					}
				case m != nil:
					if r.Err != nil || r.Idem().State != IdemInProgress || r.Idem().Token != m.token || r.Lease != nil {
						rt.Fatalf("begin %s while attempt %d owns it: %+v %v", key, m.token, r.Idem(), r.Err)
					}
				default:
					if r.Err != nil || r.Idem().State != IdemStarted || r.Lease == nil || r.Lease.Token != r.Idem().Token {
						rt.Fatalf("begin %s on a free key: %+v %v", key, r.Idem(), r.Err)
					}
					for _, a := range attempts {
						if a.key == key && a.token >= r.Idem().Token {
							rt.Fatalf("attempt token %d on %s does not exceed an earlier attempt's %d", r.Idem().Token, key, a.token)
						}
					}
					model[key] = &mIdem{fp: fp, token: r.Idem().Token, secret: sec}
					attempts = append(attempts, mAttempt{key, r.Idem().Token, sec})
				}
			case 2: // Complete by any attempt ever started on the key
				a, ok := pickAttempt(rt, attempts, key)
				if !ok {
					continue
				}
				res := fmt.Sprint("result-", a.token)
				r := apply(&IdemComplete{Key: key, LeaseID: a.token, SecretHash: secret(a.secret), Result: []byte(res)})
				owns := m != nil && !m.completed && m.token == a.token
				retry := m != nil && m.completed && m.token == a.token
				switch {
				case owns:
					if r.Err != nil || r.Idem().State != IdemCompleted {
						rt.Fatalf("complete by the owner %d: %v", a.token, r.Err)
					}
					m.completed, m.result = true, res
				case retry:
					if r.Err != nil || string(r.Idem().Result) != m.result {
						rt.Fatalf("a retried complete of %d: %+v %v", a.token, r.Idem(), r.Err)
					}
				default:
					if leasehold.CodeOf(r.Err) != leasehold.CodeStaleToken {
						rt.Fatalf("stale attempt %d completed %s: %+v %v", a.token, key, r.Idem(), r.Err)
					}
				}
			case 3: // Abandon: the attempt releases its lease
				a, ok := pickAttempt(rt, attempts, key)
				if !ok {
					continue
				}
				r := apply(&Release{LeaseID: a.token, SecretHash: secret(a.secret)})
				if m != nil && !m.completed && m.token == a.token {
					if r.Err != nil {
						rt.Fatalf("abandon by the owner %d: %v", a.token, r.Err)
					}
					delete(model, key)
				} else if r.Err == nil {
					rt.Fatalf("attempt %d released a lease it no longer holds", a.token)
				}
			case 4: // the attempt lease lapses on the leader
				if m == nil || m.completed {
					// Any lease lapses: the attempt it was, if any, is gone.
					id := rapid.Uint64Range(1, ix+1).Draw(rt, "lease")
					l, live := s.Lease(id)
					apply(&Expire{LeaseID: id, RenewCount: l.RenewCount})
					for k, o := range model {
						if live && !o.completed && o.token == id {
							delete(model, k)
						}
					}
					break
				}
				l, _ := s.Lease(m.token)
				apply(&Expire{LeaseID: m.token, RenewCount: l.RenewCount})
				delete(model, key)
			case 5: // retention runs out, or a stale forget arrives
				tok := rapid.Uint64Range(0, ix+1).Draw(rt, "token")
				if m != nil && rapid.Bool().Draw(rt, "current") {
					tok = m.token
				}
				apply(&IdemForget{Key: key, Token: tok})
				if m != nil && m.completed && m.token == tok {
					delete(model, key)
				}
			}
			checkIdemModel(rt, s, model, keys)
			timed.check(rt, s)
			capt.step(rt, s)
		}
		// Every record survives a snapshot.
		back, err := Restore(s.Snapshot(), DefaultConfig(), nil)
		if err != nil {
			rt.Fatal(err)
		}
		checkIdemModel(rt, back, model, keys)
	})
}

func pickAttempt(rt *rapid.T, attempts []mAttempt, key string) (mAttempt, bool) {
	var mine []mAttempt
	for _, a := range attempts {
		if a.key == key {
			mine = append(mine, a)
		}
	}
	if len(mine) == 0 {
		return mAttempt{}, false
	}
	return rapid.SampledFrom(mine).Draw(rt, "attempt"), true
}

// checkIdemModel compares every key with the model, and checks that only
// the owning attempt's lease holds the key's internal resource.
func checkIdemModel(rt *rapid.T, s *State, model map[string]*mIdem, keys []string) {
	for _, k := range keys {
		m := model[k]
		got, ok := s.IdemGet(k)
		holder, held := s.Holder(IdemResource(k))
		switch {
		case m == nil:
			if ok || held {
				rt.Fatalf("%s should be free: %+v, held %v", k, got, held)
			}
		case m.completed:
			if !ok || got.State != IdemCompleted || string(got.Result) != m.result || got.Token != m.token || held {
				rt.Fatalf("%s should be completed by %d with %q: %+v, held %v", k, m.token, m.result, got, held)
			}
		default:
			if !ok || got.State != IdemInProgress || got.Token != m.token || !held || holder.ID != m.token {
				rt.Fatalf("%s should be owned by attempt %d alone: %+v, holder %d", k, m.token, got, holder.ID)
			}
		}
	}
	if n, _ := s.IdemStats(); n != len(model) {
		rt.Fatalf("%d records, want %d", n, len(model))
	}
}
