package fsm

import (
	"crypto/sha256"
	"encoding/binary"
)

// A request ID is chosen by its caller, so two callers may pick the same
// one (by accident, or to read or end what another caller got). The dedup
// window, the waiters and the grants they lead to are therefore keyed by
// the request ID scoped to its caller: the authenticated identity (empty
// without auth) and the hash of the secret the request carries. A retry
// finds its first answer only if it comes from the same identity with the
// same secret, and then only if it is the same request (its fingerprint).
//
// Commands decoded from a log entry or snapshot written before scoping
// (batch version 1, snapshot version 4) keep their bare request ID as the
// key and skip the fingerprint, so replaying an old log gives the state
// the old code gave.

// requestKey scopes id to a caller and a secret hash. It starts with a zero
// byte, which no request ID (printable UTF-8) contains, so a scoped key
// never equals a bare, legacy one. Half the hash is kept: 128 bits, enough
// against a guess, at 16 bytes less per record.
func requestKey(caller string, secret [32]byte, id string) string {
	if id == "" {
		return ""
	}
	var buf [128]byte // most keys fit: one allocation, for the string
	b := append(buf[:0], 0)
	b = binary.AppendUvarint(b, uint64(len(caller)))
	b = append(b, caller...)
	b = append(b, secret[:16]...)
	return string(append(b, id...))
}

// scopedKey is a command's key: its request ID scoped to caller and
// secret, or the bare ID of a legacy command.
func scopedKey(legacy bool, caller string, secret [32]byte, id string) string {
	if legacy {
		return id
	}
	return requestKey(caller, secret, id)
}

// fingerprint identifies what a request asks for, so a retry that reuses
// a request ID for something else is refused. The zero fingerprint means
// unknown (a legacy record) and matches anything.
type fingerprint [16]byte

// sumOf is the fingerprint of what e holds. The sum methods write into a
// scratch encoder that the State keeps, so a fingerprint allocates nothing.
func sumOf(e *encoder) fingerprint {
	h := sha256.Sum256(e.b)
	return fingerprint(h[:16])
}

// startSum readies e for a fingerprint; false for a command that has none
// (a legacy one, or one without a request ID): nothing to compare with.
func (e *encoder) startSum(legacy bool, id string) bool {
	if legacy || id == "" {
		return false
	}
	e.b = e.b[:0]
	return true
}

// Key is the acquire's request ID scoped to its caller and secret.
func (c *Acquire) Key() string { return scopedKey(c.legacy, c.Caller, c.SecretHash, c.RequestID) }

// sum covers what the acquire asks for; its secret and caller are in its
// key already, and its attempt differs by design between retries. A
// campaign and a semaphore acquire add their own fields after it.
func (c *Acquire) sum(e *encoder) fingerprint {
	if !e.startSum(c.legacy, c.RequestID) {
		return fingerprint{}
	}
	c.encodeAsk(e)
	return sumOf(e)
}

func (c *Renew) key() string { return scopedKey(c.legacy, c.Caller, c.SecretHash, c.RequestID) }

func (c *Release) key() string { return scopedKey(c.legacy, c.Caller, c.SecretHash, c.RequestID) }

func (c *Release) sum(e *encoder) fingerprint {
	if !e.startSum(c.legacy, c.RequestID) {
		return fingerprint{}
	}
	e.uvarint(c.LeaseID)
	return sumOf(e)
}

func (c *Put) key() string { return scopedKey(c.legacy, c.Caller, [32]byte{}, c.RequestID) }

func (c *Put) sum(e *encoder) fingerprint {
	if !e.startSum(c.legacy, c.RequestID) {
		return fingerprint{}
	}
	e.str(c.Key)
	e.uvarint(uint64(len(c.Value)))
	e.b = append(e.b, c.Value...)
	e.bool(c.HasIfVersion)
	e.uvarint(c.IfVersion)
	encodeFence(e, c.Fence)
	return sumOf(e)
}

func (c *Delete) key() string { return scopedKey(c.legacy, c.Caller, [32]byte{}, c.RequestID) }

func (c *Delete) sum(e *encoder) fingerprint {
	if !e.startSum(c.legacy, c.RequestID) {
		return fingerprint{}
	}
	e.str(c.Key)
	e.bool(c.HasIfVersion)
	e.uvarint(c.IfVersion)
	encodeFence(e, c.Fence)
	return sumOf(e)
}

// A forced release is scoped to its actor, the authenticated identity.
func (c *ForceRelease) key() string { return scopedKey(c.legacy, c.Actor, [32]byte{}, c.RequestID) }

func (c *ForceRelease) sum(e *encoder) fingerprint {
	if !e.startSum(c.legacy, c.RequestID) {
		return fingerprint{}
	}
	e.str(c.Resource)
	e.uvarint(c.LeaseID)
	e.str(c.Reason)
	return sumOf(e)
}
