package fsm

import (
	"crypto/subtle"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Idempotency keys: a record per key holds the fingerprint of the request
// that first used it, its state and, once completed, the stored result.
// The attempt that owns a key is a lease on the internal resource
// IdemResource(key), so it expires, renews with progress and is forced
// like any lease; its token (the granting index) is the attempt's fencing
// token, strictly increasing per key. When the attempt lease ends without
// a Complete (lapse, Abandon = release, forced), the record goes away and
// the key is free again. A completed record is kept until an IdemForget,
// which the leader proposes once the record's retention has run out on
// its monotonic clock (a new leader restarts the countdown: a result is
// never forgotten early).
//
// Retries need no dedup window: a Begin carrying the secret of the
// attempt in progress is answered "started" again, and a Complete
// carrying the completing attempt's id and secret is answered with the
// completed record.

const (
	KindIdemBegin    Kind = 20
	KindIdemComplete Kind = 21
	KindIdemForget   Kind = 22
	// KindIdemBeginNamed is a Begin written since attempts are named
	// under leasehold.ReservedPrefix: as KindGroupJoinNamed.
	KindIdemBeginNamed Kind = 81
)

// IdemResource is the resource of key's attempt leases,
// "@leasehold/idem/KEY", under leasehold.ReservedPrefix, which the API
// refuses to callers: their events (Acquired, Released, Expired) are
// key's events in a watch.
func IdemResource(key string) string { return leasehold.IdemResource(key) }

// MaxIdemKeyLen bounds a key (leasehold/idempotency.go). It is what fitted
// a resource name under the first, shorter prefix (snapshot_names.go):
// every key that was valid stays so, and an attempt's resource may exceed
// a caller's resource name by the difference.
const MaxIdemKeyLen = leasehold.MaxIdemKeyLen

// The vocabulary's MaxIdemKeyLen is the one the first prefix left.
var _ [MaxIdemKeyLen - (leasehold.MaxResourceLen - len(legacyIdemPrefix))]struct{}
var _ [(leasehold.MaxResourceLen - len(legacyIdemPrefix)) - MaxIdemKeyLen]struct{}

// IdemKeyOf is the idempotency key an attempt lease's resource stands for.
func IdemKeyOf(resource string) (string, bool) { return leasehold.IdemKeyOf(resource) }

// IdemBegin starts an attempt on Key, or reports what holds it.
type IdemBegin struct {
	Key         string
	Fingerprint [32]byte // hash of the caller's request fingerprint
	Owner       string
	TTL         time.Duration // the attempt lease's TTL
	Retention   time.Duration // how long a completed result is kept (0: default)
	SecretHash  [32]byte      // the attempt's secret, hashed
	Caller      string        // see Acquire.Caller
	oldKind     bool          // decoded from KindIdemBegin
}

// IdemComplete stores Result as the key's answer and ends attempt LeaseID.
type IdemComplete struct {
	Key        string
	LeaseID    uint64
	SecretHash [32]byte
	Result     []byte
}

// IdemForget drops a completed record whose retention ran out on the
// leader. Token names the completed attempt, so a stale Forget cannot drop
// a later record of the same key.
type IdemForget struct {
	Key   string
	Token uint64
}

func (c *IdemBegin) Kind() Kind {
	if c.oldKind {
		return KindIdemBegin
	}
	return KindIdemBeginNamed
}
func (*IdemComplete) Kind() Kind { return KindIdemComplete }
func (*IdemForget) Kind() Kind   { return KindIdemForget }

func (c *IdemBegin) apply(s *State, ix uint64, now int64) Result { return s.idemBegin(ix, now, c) }
func (c *IdemComplete) apply(s *State, ix uint64, now int64) Result {
	return s.idemComplete(now, c)
}
func (c *IdemForget) apply(s *State, _ uint64, _ int64) Result { return s.idemForget(c) }

func (c *IdemBegin) encode(e *encoder) {
	e.str(c.Key)
	e.hash(c.Fingerprint)
	e.str(c.Owner)
	e.varint(int64(c.TTL))
	e.varint(int64(c.Retention))
	e.hash(c.SecretHash)
	e.str(c.Caller)
}

func (c *IdemBegin) decode(d *decoder) {
	c.Key = d.str()
	c.Fingerprint = d.hash()
	c.Owner = d.str()
	c.TTL = time.Duration(d.varint())
	c.Retention = time.Duration(d.varint())
	c.SecretHash = d.hash()
	c.Caller = d.str()
}

func (c *IdemComplete) encode(e *encoder) {
	e.str(c.Key)
	e.uvarint(c.LeaseID)
	e.hash(c.SecretHash)
	e.str(string(c.Result))
}

func (c *IdemComplete) decode(d *decoder) {
	c.Key = d.str()
	c.LeaseID = d.uvarint()
	c.SecretHash = d.hash()
	c.Result = []byte(d.str())
}

func (c *IdemForget) encode(e *encoder) {
	e.str(c.Key)
	e.uvarint(c.Token)
}

func (c *IdemForget) decode(d *decoder) {
	c.Key = d.str()
	c.Token = d.uvarint()
}

// IdemState is where a key stands, and Idem what a Begin, Complete or a
// read sees of it (leasehold/idempotency.go).
type (
	IdemState = leasehold.IdemState
	Idem      = leasehold.IdemRecord
)

const (
	IdemStarted    = leasehold.IdemStarted
	IdemInProgress = leasehold.IdemInProgress
	IdemCompleted  = leasehold.IdemCompleted
)

type idemRecord struct {
	sum         fingerprint // of the caller's fingerprint
	token       uint64      // the attempt (in progress: its live lease)
	owner       string
	startedAt   int64
	completedAt int64 // 0: in progress
	retention   time.Duration
	result      []byte
	doneBy      fingerprint // the completing attempt's secret hash (half), for retries
}

// idemPrefixOf is the part of key that the per-prefix limit counts: up to
// and including its first '/' (keys without one share the empty prefix).
func idemPrefixOf(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i+1]
	}
	return ""
}

func (s *State) idemView(key string, r *idemRecord, st IdemState) *Idem {
	v := &Idem{Key: key, State: st, Token: r.token, Owner: r.owner,
		StartedAt: nanosTime(r.startedAt), Retention: r.retention}
	if r.completedAt != 0 {
		v.CompletedAt, v.Result = nanosTime(r.completedAt), r.result
	}
	return v
}

func validateIdemKey(key string) error {
	return leasehold.ValidateName("key", key, MaxIdemKeyLen, true)
}

func (s *State) idemBegin(ix uint64, now int64, c *IdemBegin) Result {
	if err := validateIdemKey(c.Key); err != nil {
		return Result{Err: err}
	}
	sum := fingerprint(c.Fingerprint[:16])
	if r := s.idem.at(c.Key); r != nil {
		if r.sum != sum {
			return Result{Err: leasehold.Errorf(leasehold.CodeNotHolder,
				"idempotency key %q was first used for a different request (its fingerprint differs); use a new key for a new request", c.Key)}
		}
		if r.completedAt != 0 {
			return Result{Idem: s.idemView(c.Key, r, IdemCompleted)}
		}
		if l := s.leases.at(r.token); l != nil && l.secretHash == c.SecretHash { // a retry of the Begin that started it
			view := l.view()
			return Result{Idem: s.idemView(c.Key, r, IdemStarted), Lease: &view, Remaining: l.TTL, Dup: true}
		}
		return Result{Idem: s.idemView(c.Key, r, IdemInProgress)}
	}
	if err := s.idemValidate(c); err != nil {
		return Result{Err: err}
	}
	if s.lastToken == math.MaxUint64 {
		return Result{Err: leasehold.Errorf(leasehold.CodeLimit, "the fencing token space is exhausted")}
	}
	if max, p := s.cfg.MaxIdemKeysPerPrefix, idemPrefixOf(c.Key); max > 0 && s.idemCount[p] >= max {
		return Result{Err: leasehold.Errorf(leasehold.CodeLimit,
			"prefix %q already has %d idempotency keys (limit max_idem_keys_per_prefix)", p, s.idemCount[p])}
	}
	if err := s.ownerLimit(c.Owner); err != nil {
		return Result{Err: err}
	}
	retention := c.Retention
	if retention == 0 {
		retention = s.cfg.IdemRetention
	}
	l := s.grant(ix, now, &Acquire{Resources: []string{IdemResource(c.Key)}, Owner: c.Owner,
		Operation: "idempotency", TTL: c.TTL, SecretHash: c.SecretHash, Caller: c.Caller}, "")
	r := &idemRecord{sum: sum, token: l.Token, owner: c.Owner, startedAt: now, retention: retention}
	s.idem.set(c.Key, r)
	s.idemCount[idemPrefixOf(c.Key)]++
	return Result{Idem: s.idemView(c.Key, r, IdemStarted), Lease: l, Remaining: l.TTL}
}

func (s *State) idemValidate(c *IdemBegin) error {
	if err := leasehold.ValidateName("owner", c.Owner, leasehold.MaxOwnerLen, false); err != nil {
		return err
	}
	if err := leasehold.ValidateDuration("attempt_ttl", c.TTL, leasehold.MinTTL, leasehold.MaxTTL); err != nil {
		return err
	}
	if c.Retention != 0 {
		if err := leasehold.ValidateDuration("retention", c.Retention, time.Second, s.cfg.MaxIdemRetention); err != nil {
			return err
		}
	}
	return nil
}

func (s *State) idemComplete(now int64, c *IdemComplete) Result {
	r := s.idem.at(c.Key)
	if r != nil && r.completedAt != 0 && r.token == c.LeaseID {
		if subtle.ConstantTimeCompare(r.doneBy[:], c.SecretHash[:16]) == 1 {
			return Result{Idem: s.idemView(c.Key, r, IdemCompleted), Dup: true} // a retry
		}
	}
	if r == nil || r.completedAt != 0 || r.token != c.LeaseID {
		return Result{Err: leasehold.Errorf(leasehold.CodeStaleToken,
			"attempt %d no longer owns idempotency key %q: its lease ended before it completed; the stored answer, if any, is another attempt's", c.LeaseID, c.Key)}
	}
	l, err := s.holderOf(c.LeaseID, c.SecretHash, "complete")
	if err != nil {
		return Result{Err: err}
	}
	if max := s.cfg.MaxIdemResult; len(c.Result) > max {
		return Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
			"the result is %d bytes; the limit is %d (max_idem_result)", len(c.Result), max)}
	}
	if max := s.cfg.MaxIdemBytes; max > 0 && s.idemBytes+len(c.Result) > max {
		return Result{Err: leasehold.Errorf(leasehold.CodeLimit,
			"stored idempotency results already take %d bytes (limit max_idem_bytes %d); abandon the attempt or retry later", s.idemBytes, max)}
	}
	r, _ = s.idem.mut(c.Key)
	r.completedAt, r.result, r.doneBy = now, c.Result, fingerprint(c.SecretHash[:16])
	s.idemBytes += len(c.Result)
	s.end(l, EndReleased) // the record is completed: ending the lease keeps it
	s.armRetention(c.Key, r)
	return Result{Idem: s.idemView(c.Key, r, IdemCompleted)}
}

func (s *State) idemForget(c *IdemForget) Result {
	r := s.idem.at(c.Key)
	if r == nil || r.completedAt == 0 || r.token != c.Token {
		return Result{}
	}
	s.dropIdem(c.Key, r)
	return Result{}
}

// idemEnded frees the key of an attempt lease that ended without a
// Complete.
func (s *State) idemEnded(l *lease) {
	key, ok := IdemKeyOf(l.Resources[0])
	if !ok {
		return
	}
	if r := s.idem.at(key); r != nil && r.completedAt == 0 && r.token == l.ID {
		s.dropIdem(key, r)
	}
}

func (s *State) dropIdem(key string, r *idemRecord) {
	s.idem.del(key)
	if r.completedAt != 0 {
		s.disarm(retentionKey(key))
	}
	s.idemBytes -= len(r.result)
	p := idemPrefixOf(key)
	if s.idemCount[p]--; s.idemCount[p] <= 0 {
		delete(s.idemCount, p)
	}
}

// IdemGet returns what key holds, if anything.
func (s *State) IdemGet(key string) (Idem, bool) {
	r := s.idem.at(key)
	if r == nil {
		return Idem{}, false
	}
	st := IdemInProgress
	if r.completedAt != 0 {
		st = IdemCompleted
	}
	return *s.idemView(key, r, st), true
}

// IdemList returns up to limit keys starting with prefix, after the key
// after, in key order.
func (s *State) IdemList(prefix, after string, limit int) []Idem {
	keys := make([]string, 0)
	for k := range s.idem.all() {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]Idem, 0, len(keys))
	for _, k := range keys {
		v, _ := s.IdemGet(k)
		out = append(out, v)
	}
	return out
}

// IdemStats is the count of records and the bytes of stored results.
func (s *State) IdemStats() (keys, bytes int) { return s.idem.len(), s.idemBytes }
