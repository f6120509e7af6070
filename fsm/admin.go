package fsm

import (
	"strings"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Forced release and its audit log. A forced release names the resource
// and the lease the operator saw holding it, so a newer holder is never
// released by mistake; it records who did it and why, in the replicated
// log, and bumps nothing by hand: the next grant simply gets a larger
// token.

const KindForceRelease Kind = 10

// KindForceReleaseNamed is a forced release of a name under
// leasehold.ReservedPrefix (snapshot_names.go), which an older node knows
// by another name: it stops at it ("upgrade it") rather than miss the
// lease. The body is KindForceRelease's.
const KindForceReleaseNamed Kind = 82

// MaxReasonLen bounds an audit reason (leasehold/leases.go).
const MaxReasonLen = leasehold.MaxReasonLen

// ForceRelease ends the lease holding Resource, if it is still LeaseID.
type ForceRelease struct {
	RequestID string
	Resource  string
	LeaseID   uint64
	Actor     string // the authenticated identity
	Reason    string
	legacy    bool // decoded from a log entry written before scoping
	named     bool // decoded from KindForceReleaseNamed
}

func (c *ForceRelease) Kind() Kind {
	if c.named || strings.HasPrefix(c.Resource, leasehold.ReservedPrefix) {
		return KindForceReleaseNamed
	}
	return KindForceRelease
}

func (c *ForceRelease) apply(s *State, ix uint64, now int64) Result {
	return s.leases.forceRelease(ix, now, c)
}

func (c *ForceRelease) encode(e *encoder) {
	e.str(c.RequestID)
	e.str(c.Resource)
	e.uvarint(c.LeaseID)
	e.str(c.Actor)
	e.str(c.Reason)
}

func (c *ForceRelease) decode(d *decoder) {
	c.RequestID = d.str()
	c.Resource = legacyName(d.str())
	c.LeaseID = d.uvarint()
	c.Actor = d.str()
	c.Reason = d.str()
	c.legacy = d.legacy
}

// AuditRecord is one entry of the audit log (leasehold/leases.go). It
// never holds a secret.
type AuditRecord = leasehold.AuditRecord

func encodeAudit(e *encoder, a *AuditRecord) {
	e.uvarint(a.Index)
	e.varint(timeNanos(a.Time))
	e.str(a.Actor)
	e.str(a.Action)
	e.str(a.Resource)
	e.uvarint(a.LeaseID)
	e.uvarint(a.Token)
	e.str(a.Owner)
	e.str(a.Operation)
	e.str(a.Reason)
}

func decodeAudit(d *decoder) AuditRecord {
	return AuditRecord{
		Index: d.uvarint(), Time: nanosTime(d.varint()), Actor: d.str(), Action: d.str(), Resource: legacyName(d.str()),
		LeaseID: d.uvarint(), Token: d.uvarint(), Owner: d.str(), Operation: d.str(), Reason: d.str(),
	}
}

func (ls *leaseState) forceRelease(ix uint64, now int64, c *ForceRelease) Result {
	s := ls.st
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := c.key(), c.sum(&s.scratch)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindForceRelease, sum); ok {
		return r
	}
	r := ls.doForceRelease(ix, now, c)
	s.dedup.put(key, KindForceRelease, sum, now, r, s.cfg)
	return r
}

func (ls *leaseState) doForceRelease(ix uint64, now int64, c *ForceRelease) Result {
	s := ls.st
	if err := ValidateForcedResource(c.Resource); err != nil {
		return Result{Err: err}
	}
	if err := leasehold.ValidateName("actor", c.Actor, leasehold.MaxOwnerLen, true); err != nil {
		return Result{Err: err}
	}
	if err := leasehold.ValidateName("reason", c.Reason, MaxReasonLen, true); err != nil {
		return Result{Err: err}
	}
	id, held := ls.holders.get(c.Resource)
	if sem := s.sems.byName.at(c.Resource); !held && sem != nil {
		return Result{Err: leasehold.Errorf(leasehold.CodeNotFound,
			"%q is a semaphore, whose slots are held, never the name: force-release the holder's slot (%q to %q)",
			c.Resource, leasehold.SlotName(c.Resource, 1), leasehold.SlotName(c.Resource, sem.limit))}
	}
	if !held {
		return Result{Err: leasehold.Errorf(leasehold.CodeNotFound, "resource %q is not held; nothing to release", c.Resource)}
	}
	if id != c.LeaseID {
		return Result{Err: leasehold.Errorf(leasehold.CodeNotHolder,
			"resource %q is held by lease %d, not %d: look again before forcing a release", c.Resource, id, c.LeaseID)}
	}
	l := ls.byID.at(id)
	view := ls.end(l, EndForced)
	s.record(AuditRecord{
		Index: ix, Time: time.Unix(0, now).UTC(), Actor: c.Actor, Action: "force-release", Resource: c.Resource,
		LeaseID: l.ID, Token: l.Token, Owner: l.Owner, Operation: l.Operation, Reason: c.Reason,
	})
	// The holder may still be writing: a lock-delay protects resources that
	// cannot check tokens, as after an expiry.
	if l.LockDelay() > 0 {
		ls.block(l)
	} else {
		ls.wake(ix, now, l.Resources)
	}
	return Result{Lease: view}
}

// record adds an operator's action to the audit log, which keeps the
// newest AuditMax.
func (s *State) record(a AuditRecord) {
	s.audit = append(s.audit, a)
	if n := len(s.audit) - s.cfg.AuditMax; n > 0 {
		s.audit = append([]AuditRecord(nil), s.audit[n:]...)
	}
}

// auditName records an operator's action on a name (a queue's purge or
// delete, a group's delete), like a forced release.
func (s *State) auditName(ix uint64, now int64, actor, action, name, reason string) {
	s.record(AuditRecord{Index: ix, Time: time.Unix(0, now).UTC(), Actor: actor,
		Action: action, Resource: name, Reason: reason})
}

// Audit returns up to limit audit records made at or after since, oldest
// first.
func (s *State) Audit(since time.Time, limit int) []AuditRecord {
	var out []AuditRecord
	for _, a := range s.audit {
		if !a.Time.Before(since) {
			out = append(out, a)
			if len(out) == limit {
				break
			}
		}
	}
	return out
}

// The snapshot section of the audit log, oldest first.
func writeAudit(s *State, e *encoder) {
	e.uvarint(uint64(len(s.audit)))
	for i := range s.audit {
		encodeAudit(e, &s.audit[i])
		e.spill()
	}
}

func readAudit(s *State, d *decoder, _ byte) error {
	for range d.count(10) {
		s.audit = append(s.audit, decodeAudit(d))
	}
	return nil
}
