package fsm

import (
	"fmt"
	"time"
)

// Kind is a command's type byte. Kinds with the Ignorable bit set may be
// skipped by a node that does not know them; any other unknown kind stops
// the node, because skipping it would let replicas diverge.
type Kind uint8

const Ignorable Kind = 0x80

const (
	KindAcquire     Kind = 1 // take resources now, or queue for them
	KindRenew       Kind = 2 // extend a lease, proven by its secret
	KindRelease     Kind = 3 // end a lease, proven by its secret
	KindExpire      Kind = 4 // the leader's timer ran out for a lease
	KindCancel      Kind = 5 // a waiting acquire was withdrawn
	KindWaitTimeout Kind = 6 // a waiting acquire reached its wait bound
	KindUnblock     Kind = 7 // a resource's lock-delay ended
)

// Command is one state change. Commands carry everything they need: the
// state machine reads no clock and makes no random choice. Every kind has
// one row in the table of commands (registry.go).
type Command interface {
	Kind() Kind
	encode(e *encoder)
	decode(d *decoder)
	// apply makes the change in the entry at log index ix, stamped with the
	// leader's wall clock now (unix nanoseconds).
	apply(s *State, ix uint64, now int64) Result
}

// Acquire asks for every resource at once: a lock. With Wait > 0 it
// queues if it cannot be granted now. A Campaign (elections.go) and a
// SemAcquire (semaphore.go) are acquires of other kinds that embed it:
// they share its fields, its dedup and its waiting, and differ where Ask
// says.
type Acquire struct {
	RequestID  string
	Resources  []string
	Owner      string
	Operation  string
	TTL        time.Duration
	Wait       time.Duration
	LockDelay  time.Duration
	MaxHold    time.Duration
	Metadata   map[string]string
	SecretHash [32]byte
	// Attempt names one try of the request (request IDs repeat across
	// retries); a Cancel withdraws only what its own attempt made.
	Attempt string
	// Caller is the authenticated identity that sent it (empty without
	// auth), stamped by the node, never taken from the request: with the
	// secret's hash it scopes the request ID (see Key).
	Caller string
	legacy bool // decoded from a log entry written before scoping
}

// Renew extends a lease by its TTL. Age is stamped by the leader: how long
// the lease has been held so far, used to end it at MaxHold.
type Renew struct {
	RequestID  string
	LeaseID    uint64
	SecretHash [32]byte
	Progress   string
	Age        time.Duration
	Caller     string // see Acquire.Caller
	legacy     bool
}

// Release ends a lease; only its holder can.
type Release struct {
	RequestID  string
	LeaseID    uint64
	SecretHash [32]byte
	Caller     string // see Acquire.Caller
	legacy     bool
}

// Expire ends a lease whose countdown ran out on the leader. It applies only
// if the lease has not been renewed since the leader decided.
type Expire struct {
	LeaseID    uint64
	RenewCount uint64
}

// Cancel withdraws a waiting acquire by its key (Acquire.Key: the request
// ID scoped to its caller and secret) and attempt, when its caller went
// away. If the acquire was granted in the meantime, the grant is released.
// It does nothing to a waiter or grant that another attempt (a retry) made
// or took over: the latest attempt owns them. The node proposes it from
// the acquire it made; no caller names a key.
type Cancel struct {
	Key     string
	Attempt string
}

// WaitTimeout ends a waiting acquire, named by its key, that reached its
// wait bound.
type WaitTimeout struct{ Key string }

// Unblock ends the lock-delay of a resource. Token names the expired lease
// that caused it, so a stale Unblock cannot end a newer lock-delay.
type Unblock struct {
	Resource string
	Token    uint64
}

func (*Acquire) Kind() Kind     { return KindAcquire }
func (*Renew) Kind() Kind       { return KindRenew }
func (*Release) Kind() Kind     { return KindRelease }
func (*Expire) Kind() Kind      { return KindExpire }
func (*Cancel) Kind() Kind      { return KindCancel }
func (*WaitTimeout) Kind() Kind { return KindWaitTimeout }
func (*Unblock) Kind() Kind     { return KindUnblock }

func (c *Acquire) apply(s *State, ix uint64, now int64) Result { return s.leases.acquire(ix, now, c) }
func (c *Renew) apply(s *State, _ uint64, now int64) Result    { return s.leases.renew(now, c) }
func (c *Release) apply(s *State, ix uint64, now int64) Result { return s.leases.release(ix, now, c) }
func (c *Expire) apply(s *State, ix uint64, now int64) Result  { return s.leases.expire(ix, now, c) }
func (c *Cancel) apply(s *State, ix uint64, now int64) Result  { return s.leases.cancel(ix, now, c) }
func (c *WaitTimeout) apply(s *State, ix uint64, now int64) Result {
	return s.leases.waitTimeout(ix, now, c)
}
func (c *Unblock) apply(s *State, ix uint64, now int64) Result { return s.leases.unblock(ix, now, c) }

func (c *Acquire) encode(e *encoder) { c.encodeBody(e) }

// encodeBody is a plain acquire's encoding, which a campaign, a
// semaphore acquire and a snapshot's waiter embed.
func (c *Acquire) encodeBody(e *encoder) {
	e.str(c.RequestID)
	c.encodeAsk(e)
	e.hash(c.SecretHash)
	e.str(c.Attempt)
	e.str(c.Caller)
}

// encodeAsk writes what the acquire asks for: the middle of its encoding,
// and the start of every kind's fingerprint.
func (c *Acquire) encodeAsk(e *encoder) {
	e.strs(c.Resources)
	e.str(c.Owner)
	e.str(c.Operation)
	e.varint(int64(c.TTL))
	e.varint(int64(c.Wait))
	e.varint(int64(c.LockDelay))
	e.varint(int64(c.MaxHold))
	e.strMap(c.Metadata)
}

func (c *Acquire) decode(d *decoder) {
	c.RequestID = d.str()
	c.Resources = d.strs()
	c.Owner = d.str()
	c.Operation = d.str()
	c.TTL = time.Duration(d.varint())
	c.Wait = time.Duration(d.varint())
	c.LockDelay = time.Duration(d.varint())
	c.MaxHold = time.Duration(d.varint())
	c.Metadata = d.strMap()
	c.SecretHash = d.hash()
	c.Attempt = d.str()
	c.Caller, c.legacy = d.caller(), d.legacy
}

func (c *Renew) encode(e *encoder) {
	e.str(c.RequestID)
	e.uvarint(c.LeaseID)
	e.hash(c.SecretHash)
	e.str(c.Progress)
	e.varint(int64(c.Age))
	e.str(c.Caller)
}

func (c *Renew) decode(d *decoder) {
	c.RequestID = d.str()
	c.LeaseID = d.uvarint()
	c.SecretHash = d.hash()
	c.Progress = d.str()
	c.Age = time.Duration(d.varint())
	c.Caller, c.legacy = d.caller(), d.legacy
}

func (c *Release) encode(e *encoder) {
	e.str(c.RequestID)
	e.uvarint(c.LeaseID)
	e.hash(c.SecretHash)
	e.str(c.Caller)
}

func (c *Release) decode(d *decoder) {
	c.RequestID = d.str()
	c.LeaseID = d.uvarint()
	c.SecretHash = d.hash()
	c.Caller, c.legacy = d.caller(), d.legacy
}

func (c *Expire) encode(e *encoder) { e.uvarint(c.LeaseID); e.uvarint(c.RenewCount) }
func (c *Expire) decode(d *decoder) { c.LeaseID = d.uvarint(); c.RenewCount = d.uvarint() }

// A legacy Cancel or WaitTimeout carries a bare request ID, which is the
// key of a legacy waiter: the same encoding serves both.
func (c *Cancel) encode(e *encoder) { e.str(c.Key); e.str(c.Attempt) }
func (c *Cancel) decode(d *decoder) { c.Key = d.str(); c.Attempt = d.str() }

func (c *WaitTimeout) encode(e *encoder) { e.str(c.Key) }
func (c *WaitTimeout) decode(d *decoder) { c.Key = d.str() }

func (c *Unblock) encode(e *encoder) { e.str(c.Resource); e.uvarint(c.Token) }
func (c *Unblock) decode(d *decoder) { c.Resource = d.str(); c.Token = d.uvarint() }

// Batch is one log entry: several commands that the node merged into a
// single commit. Time is the leader's wall clock when it proposed the batch;
// it is shown to operators and bounds the dedup window, and never decides
// expiry.
type Batch struct {
	Time int64 // unix nanoseconds
	Cmds []Command
}

// batchVersion 2 added the caller to acquires, renewals, releases and KV
// writes; version 1 entries are still read (see request.go). Version 3
// starts every command's body with its body version (the row's version
// in the table of commands): a field added to a command is a new version
// of its kind, not a new kind. Bodies of versions 1 and 2 are body
// version 1, but for the kinds that carried their body version already
// (kindRow.inBody), whose bodies read the same in every batch version.
const (
	batchVersion = 3
	batchOldest  = 1
)

// Encode appends the batch's encoding to buf.
func (b *Batch) Encode(buf []byte) []byte {
	e := encoder{b: buf}
	e.byte1(batchVersion)
	e.varint(b.Time)
	e.uvarint(uint64(len(b.Cmds)))
	var body encoder
	for _, c := range b.Cmds {
		k := c.Kind()
		body.b = append(body.b[:0], rowOf(k).version)
		c.encode(&body)
		e.byte1(byte(k))
		e.uvarint(uint64(len(body.b)))
		e.b = append(e.b, body.b...)
	}
	return e.b
}

// DecodeBatch parses a log entry. Commands of unknown ignorable kinds are
// dropped; an unknown kind without the ignorable bit is an error.
func DecodeBatch(data []byte) (*Batch, error) {
	d := decoder{b: data}
	v := d.byte1()
	if d.err == nil && (v < batchOldest || v > batchVersion) {
		return nil, fmt.Errorf("fsm: log entry version %d is not one this node understands (%d to %d); upgrade it", v, batchOldest, batchVersion)
	}
	b := &Batch{Time: d.varint()}
	n := d.count(2)
	b.Cmds = make([]Command, 0, n)
	for range n {
		k := Kind(d.byte1())
		size := d.uvarint()
		if d.err != nil || size > uint64(len(d.b)) {
			return nil, errCorrupt
		}
		body := decoder{b: d.b[:size], legacy: v < 2, version: 1}
		d.b = d.b[size:]
		row := rowOf(k)
		if row == nil {
			if k&Ignorable != 0 {
				continue
			}
			return nil, fmt.Errorf("fsm: unknown command kind %d: this node is older than the log; upgrade it", k)
		}
		if v >= 3 || row.inBody {
			body.version = body.byte1()
			switch {
			case body.err != nil || body.version == 0:
				return nil, errCorrupt
			case body.version > row.version:
				return nil, fmt.Errorf("fsm: command kind %d (%s) of body version %d is newer than this node knows (up to %d): upgrade it",
					k, row.name, body.version, row.version)
			}
		}
		c := row.new()
		c.decode(&body)
		if body.err != nil || len(body.b) != 0 {
			return nil, errCorrupt
		}
		b.Cmds = append(b.Cmds, c)
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, errCorrupt
	}
	return b, nil
}
