package history

// Grant is one acknowledged grant of a fencing token on a resource (a
// lease, or anything else whose token a fence checks).
type Grant struct {
	Op       int64 // the id of the operation that answered it (0: none)
	Phase    int   // fault boundary count: a grant in a later phase must be above every earlier token
	Resource string
	Lease    uint64
	Token    uint64
	At       int64 // when the grant's answer arrived, on the recorder's monotonic clock (0: unknown)
}

// Write is one acknowledged KV put at Version (the log index that applied
// it), fenced by (Resource, Token) if Resource is set. Every write goes to
// a key of its own.
type Write struct {
	Op       int64
	Key      string
	Value    []byte
	Version  uint64
	Resource string
	Token    uint64
	Sent     int64 // when it was sent, on the clock of Grant.At (0: unknown, say another process sent it)
}

// TokensReused finds grants (in the order they were learned) whose token
// is not above a token answered earlier: the same token for two grants, a
// token not above an earlier grant's on the same resource, or after a
// fault boundary a token not above every token answered before it. Each
// grant is its own event (one resource per lease, recorded once), so even
// the same lease id again is a reissue.
func TokensReused(grants []Grant) []Violation {
	var out []Violation
	for i, g := range grants {
		for _, e := range grants[:i] {
			bad := e.Token == g.Token ||
				(e.Resource == g.Resource && e.Token > g.Token) ||
				(e.Phase < g.Phase && e.Token > g.Token)
			if bad {
				out = append(out, violation(CheckTokenReused, ops(e.Op, g.Op),
					"%s got token %d (lease %d) after %s had token %d (lease %d)",
					g.Resource, g.Token, g.Lease, e.Resource, e.Token, e.Lease))
				break
			}
		}
	}
	return out
}

// StaleWrites finds fenced writes applied after a newer grant on their
// resource, a grant of the resource with a token above the write's that
// either (a) is below the write's version, the log index that applied it
// (tokens and versions are both log indexes, so they compare), or (b) was
// answered before the write was sent. (a) alone goes blind after a leader
// change: a new leader raises tokens above its log's indexes (the token
// floor), and a stale write's version is then below the newer token.
func StaleWrites(grants []Grant, writes []Write) []Violation {
	var out []Violation
	for _, w := range writes {
		if w.Resource == "" {
			continue
		}
		for _, g := range grants {
			if g.Resource != w.Resource || g.Token <= w.Token {
				continue
			}
			if g.Token < w.Version || (g.At != 0 && w.Sent != 0 && w.Sent > g.At) {
				out = append(out, violation(CheckStaleWrite, ops(g.Op, w.Op),
					"%s fenced by %s token %d applied at %d, after token %d was granted",
					w.Key, w.Resource, w.Token, w.Version, g.Token))
				break
			}
		}
	}
	return out
}

// ops lists the non-zero operation ids.
func ops(ids ...int64) []int64 {
	var out []int64
	for _, id := range ids {
		if id != 0 {
			out = append(out, id)
		}
	}
	return out
}
