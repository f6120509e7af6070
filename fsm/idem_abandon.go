package fsm

import "github.com/leasehold/leasehold/api/leasehold"

// KindIdemAbandon ends an attempt without a result. Before it, a node
// proposed a plain Release after reading that the lease was the key's; a
// retry of an Abandon whose answer was lost then found the lease gone and
// was refused as stale, though the first had freed the key. Deciding here
// lets the release's own dedup record answer the retry.
const KindIdemAbandon Kind = 79

// IdemAbandon releases attempt LeaseID, which must be one of Key's (a
// lease id names one lease forever), so the key is free at once. With a
// RequestID, a retry is answered as the first was, from the dedup window.
type IdemAbandon struct {
	Key string
	Release
}

func (*IdemAbandon) Kind() Kind { return KindIdemAbandon }

func (c *IdemAbandon) apply(s *State, ix uint64, now int64) Result { return s.idem.abandon(ix, now, c) }

func (c *IdemAbandon) encode(e *encoder) { e.str(c.Key); c.Release.encode(e) }

func (c *IdemAbandon) decode(d *decoder) { c.Key = d.str(); c.Release.decode(d) }

func (is *idemState) abandon(ix uint64, now int64, c *IdemAbandon) Result {
	s := is.st
	if s.dedup.recs.at(c.Release.key()) == nil { // a retry goes on to its recorded answer
		l := s.leases.byID.at(c.LeaseID)
		if l == nil || l.Resources[0] != IdemResource(c.Key) {
			return Result{Err: leasehold.Errorf(leasehold.CodeStaleToken,
				"attempt %d does not own idempotency key %q: it completed, lapsed or was abandoned already", c.LeaseID, c.Key)}
		}
	}
	return s.leases.release(ix, now, &c.Release)
}
