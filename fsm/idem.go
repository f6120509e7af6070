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

func (c *IdemBegin) apply(s *State, ix uint64, now int64) Result { return s.idem.begin(ix, now, c) }
func (c *IdemComplete) apply(s *State, ix uint64, now int64) Result {
	return s.idem.complete(now, c)
}
func (c *IdemForget) apply(s *State, _ uint64, _ int64) Result { return s.idem.forget(c) }

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

// The idempotency sub-state: a record per key, and the counts its limits
// read (keys per prefix, bytes of stored results).
type idemState struct {
	st        *State
	records   cowMap[string, *idemRecord]
	perPrefix map[string]int // key prefix -> records
	bytes     int            // bytes of stored results
}

func (is *idemState) init(s *State) {
	*is = idemState{st: s, records: newCowMap[string, *idemRecord](), perPrefix: make(map[string]int)}
	s.track(&is.records)
}

func (is *idemState) captureInto(v *State) {
	v.idem = idemState{st: v, records: is.records.freeze(), bytes: is.bytes}
}

func (is *idemState) eachCountdown(f func(Countdown)) {
	for k, r := range is.records.all() {
		if r.completedAt != 0 {
			f(retentionCountdown(k, r))
		}
	}
}

// idemAnswer is an idempotency command's answer in a Result: an Idem
// (defined here, as leasehold's type cannot carry the answer method).
type idemAnswer Idem

func (*idemAnswer) answer() {}

// Idem is an idempotency command's answer, nil for none.
func (r Result) Idem() *Idem {
	a, _ := r.Answer.(*idemAnswer)
	return (*Idem)(a)
}

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

func (is *idemState) view(key string, r *idemRecord, st IdemState) *Idem {
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

func (is *idemState) begin(ix uint64, now int64, c *IdemBegin) Result {
	s := is.st
	if err := validateIdemKey(c.Key); err != nil {
		return Result{Err: err}
	}
	sum := fingerprint(c.Fingerprint[:16])
	if r := is.records.at(c.Key); r != nil {
		if r.sum != sum {
			return Result{Err: leasehold.Errorf(leasehold.CodeNotHolder,
				"idempotency key %q was first used for a different request (its fingerprint differs); use a new key for a new request", c.Key)}
		}
		if r.completedAt != 0 {
			return Result{Answer: (*idemAnswer)(is.view(c.Key, r, IdemCompleted))}
		}
		if l := s.leases.byID.at(r.token); l != nil && l.secretHash == c.SecretHash { // a retry of the Begin that started it
			view := l.view()
			return Result{Answer: (*idemAnswer)(is.view(c.Key, r, IdemStarted)), Lease: &view, Remaining: l.TTL, Dup: true}
		}
		return Result{Answer: (*idemAnswer)(is.view(c.Key, r, IdemInProgress))}
	}
	if err := is.validate(c); err != nil {
		return Result{Err: err}
	}
	if s.lastToken == math.MaxUint64 {
		return Result{Err: leasehold.Errorf(leasehold.CodeLimit, "the fencing token space is exhausted")}
	}
	if max, p := s.cfg.MaxIdemKeysPerPrefix, idemPrefixOf(c.Key); max > 0 && is.perPrefix[p] >= max {
		return Result{Err: leasehold.Errorf(leasehold.CodeLimit,
			"prefix %q already has %d idempotency keys (limit max_idem_keys_per_prefix)", p, is.perPrefix[p])}
	}
	if err := s.leases.ownerLimit(c.Owner); err != nil {
		return Result{Err: err}
	}
	retention := c.Retention
	if retention == 0 {
		retention = s.cfg.IdemRetention
	}
	l := s.leases.grant(ix, now, &Acquire{Resources: []string{IdemResource(c.Key)}, Owner: c.Owner,
		Operation: "idempotency", TTL: c.TTL, SecretHash: c.SecretHash, Caller: c.Caller}, "")
	r := &idemRecord{sum: sum, token: l.Token, owner: c.Owner, startedAt: now, retention: retention}
	is.records.set(c.Key, r)
	is.perPrefix[idemPrefixOf(c.Key)]++
	return Result{Answer: (*idemAnswer)(is.view(c.Key, r, IdemStarted)), Lease: l, Remaining: l.TTL}
}

func (is *idemState) validate(c *IdemBegin) error {
	s := is.st
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

func (is *idemState) complete(now int64, c *IdemComplete) Result {
	s := is.st
	r := is.records.at(c.Key)
	if r != nil && r.completedAt != 0 && r.token == c.LeaseID {
		if subtle.ConstantTimeCompare(r.doneBy[:], c.SecretHash[:16]) == 1 {
			return Result{Answer: (*idemAnswer)(is.view(c.Key, r, IdemCompleted)), Dup: true} // a retry
		}
	}
	if r == nil || r.completedAt != 0 || r.token != c.LeaseID {
		return Result{Err: leasehold.Errorf(leasehold.CodeStaleToken,
			"attempt %d no longer owns idempotency key %q: its lease ended before it completed; the stored answer, if any, is another attempt's", c.LeaseID, c.Key)}
	}
	l, err := s.leases.holderOf(c.LeaseID, c.SecretHash, "complete")
	if err != nil {
		return Result{Err: err}
	}
	if max := s.cfg.MaxIdemResult; len(c.Result) > max {
		return Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
			"the result is %d bytes; the limit is %d (max_idem_result)", len(c.Result), max)}
	}
	if max := s.cfg.MaxIdemBytes; max > 0 && is.bytes+len(c.Result) > max {
		return Result{Err: leasehold.Errorf(leasehold.CodeLimit,
			"stored idempotency results already take %d bytes (limit max_idem_bytes %d); abandon the attempt or retry later", is.bytes, max)}
	}
	r, _ = is.records.mut(c.Key)
	r.completedAt, r.result, r.doneBy = now, c.Result, fingerprint(c.SecretHash[:16])
	is.bytes += len(c.Result)
	s.leases.end(l, EndReleased) // the record is completed: ending the lease keeps it
	s.armRetention(c.Key, r)
	return Result{Answer: (*idemAnswer)(is.view(c.Key, r, IdemCompleted))}
}

func (is *idemState) forget(c *IdemForget) Result {
	r := is.records.at(c.Key)
	if r == nil || r.completedAt == 0 || r.token != c.Token {
		return Result{}
	}
	is.drop(c.Key, r)
	return Result{}
}

// idemEnded frees the key of an attempt lease that ended without a
// Complete.
func (is *idemState) leaseEnded(l *lease) {
	key, ok := IdemKeyOf(l.Resources[0])
	if !ok {
		return
	}
	if r := is.records.at(key); r != nil && r.completedAt == 0 && r.token == l.ID {
		is.drop(key, r)
	}
}

func (is *idemState) drop(key string, r *idemRecord) {
	s := is.st
	is.records.del(key)
	if r.completedAt != 0 {
		s.disarm(retentionKey(key))
	}
	is.bytes -= len(r.result)
	p := idemPrefixOf(key)
	if is.perPrefix[p]--; is.perPrefix[p] <= 0 {
		delete(is.perPrefix, p)
	}
}

// IdemGet returns what key holds, if anything.
func (s *State) IdemGet(key string) (Idem, bool) {
	r := s.idem.records.at(key)
	if r == nil {
		return Idem{}, false
	}
	st := IdemInProgress
	if r.completedAt != 0 {
		st = IdemCompleted
	}
	return *s.idem.view(key, r, st), true
}

// IdemList returns up to limit keys starting with prefix, after the key
// after, in key order.
func (s *State) IdemList(prefix, after string, limit int) []Idem {
	keys := make([]string, 0)
	for k := range s.idem.records.all() {
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
func (s *State) IdemStats() (keys, bytes int) { return s.idem.records.len(), s.idem.bytes }
