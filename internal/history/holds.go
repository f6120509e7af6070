package history

import (
	"sort"
	"time"
)

// Hold is one grant of authority as its holder saw it: a lease, an
// election's term, a partition's epoch, an idempotency attempt. Times are
// nanoseconds on the recorder's one monotonic clock (one process, one
// clock).
type Hold struct {
	Op       int64  // the operation that granted it (0: none)
	EndOp    int64  // the operation that ended it (0: none)
	Owner    string // who held it, for messages
	Resource string
	Token    uint64
	Lease    uint64
	Sent     int64 // before the request that granted it was sent
	Ack      int64 // the grant was answered (the holder knew of it)
	LastOK   int64 // before the last successful renewal was sent (or Sent)
	End      int64 // the end of the safe window: min(release sent, local deadline)
	// TTL, if set, is checked: a hold that lapsed (neither released nor
	// of unknown release) was re-granted no sooner than TTL after LastOK.
	TTL            time.Duration
	Released       bool // a release was acknowledged
	ReleaseUnknown bool // a release was sent, its outcome is unknown
}

// Exclusion checks holds of one kind: every token is non-zero and issued
// once (a hold recorded twice, the same lease and token, counts once); per
// resource, real time never contradicts token order (a grant
// answered before another was even requested has the smaller token);
// holders' safe windows never overlap; and a lapsed hold ran its TTL.
func Exclusion(holds []Hold) []Violation {
	var out []Violation
	byToken := map[uint64]Hold{}
	byRes := map[string][]Hold{}
	for _, h := range holds {
		if h.Token == 0 {
			out = append(out, violation(CheckBadRecord, ops(h.Op), "%s granted to %s with token 0", h.Resource, h.Owner))
			continue
		}
		if o, dup := byToken[h.Token]; dup {
			if h.Lease != 0 && o.Lease == h.Lease {
				continue // one grant recorded twice
			}
			out = append(out, violation(CheckTokenReused, ops(o.Op, h.Op), "token %d issued twice: to %s on %s and to %s on %s",
				h.Token, o.Owner, o.Resource, h.Owner, h.Resource))
			continue
		}
		byToken[h.Token] = h
		byRes[h.Resource] = append(byRes[h.Resource], h)
	}
	resources := make([]string, 0, len(byRes))
	for r := range byRes {
		resources = append(resources, r)
	}
	sort.Strings(resources)
	for _, res := range resources {
		hs := byRes[res]
		sort.Slice(hs, func(i, j int) bool { return hs[i].Token < hs[j].Token })
		for i := range hs {
			for j := i + 1; j < len(hs); j++ {
				a, b := hs[i], hs[j] // a.Token < b.Token: a was granted first
				if b.Ack < a.Sent {
					out = append(out, violation(CheckTokenReused, ops(b.Op, a.Op),
						"%s: token %d answered %v before token %d was requested", res, b.Token, dur(a.Sent-b.Ack), a.Token))
				} else if a.End >= b.Ack { // (out of order, they overlap too: one violation)
					out = append(out, violation(CheckOverlap, ops(a.Op, a.EndOp, b.Op),
						"%s: holders overlap: %s held token %d (client side) until %v after %s's token %d was answered",
						res, a.Owner, a.Token, dur(a.End-b.Ack), b.Owner, b.Token))
				}
				if a.TTL > 0 && !a.Released && !a.ReleaseUnknown {
					if held := time.Duration(b.Ack - a.LastOK); held < a.TTL {
						out = append(out, violation(CheckTTL, ops(a.Op, b.Op),
							"%s: lease %d (token %d) lapsed and was re-granted (token %d) only %v after its last renewal was sent; TTL %v",
							res, a.Lease, a.Token, b.Token, held, a.TTL))
					}
				}
			}
		}
	}
	return out
}

func dur(ns int64) time.Duration { return time.Duration(ns).Round(time.Microsecond) }
