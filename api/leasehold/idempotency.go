package leasehold

import (
	"strings"
	"time"
)

// The vocabulary of idempotency keys: their limits, where a key stands,
// and the resource of a key's attempt leases.

const (
	// MaxIdemKeyLen bounds a key. It is what fitted a resource name under
	// the first, shorter prefix of attempt resources ("\x00idem/", 6
	// bytes): every key that was valid stays so, and an attempt's resource
	// may exceed a caller's resource name by the difference.
	MaxIdemKeyLen = MaxResourceLen - 6
	// MaxFingerprintLen bounds what a caller sends as a fingerprint; only
	// its hash is kept.
	MaxFingerprintLen = 1 << 10
)

// idemAttempts starts every attempt lease's resource. It is under
// ReservedPrefix, which the API refuses to callers, so no caller can
// acquire or block it.
const idemAttempts = ReservedPrefix + "idem/"

// IdemResource is the resource of key's attempt leases,
// "@leasehold/idem/KEY": their events (granted, released, expired) are
// key's events in a watch.
func IdemResource(key string) string { return idemAttempts + key }

// IdemKeyOf is the idempotency key an attempt lease's resource stands for.
func IdemKeyOf(resource string) (string, bool) { return strings.CutPrefix(resource, idemAttempts) }

// IdemState is where a key stands.
type IdemState uint8

const (
	IdemStarted    IdemState = iota + 1 // this Begin owns a new attempt
	IdemInProgress                      // another attempt owns the key
	IdemCompleted                       // the key has a stored result
)

func (s IdemState) String() string {
	switch s {
	case IdemStarted:
		return "started"
	case IdemInProgress:
		return "in_progress"
	case IdemCompleted:
		return "completed"
	}
	return "unknown"
}

// IdemRecord is what a Begin, Complete or a read sees of a key. Result is
// the stored body; readers without the right to see it must drop it.
type IdemRecord struct {
	Key         string
	State       IdemState
	Token       uint64 // the attempt's fencing token (= its lease id)
	Owner       string
	StartedAt   time.Time // leader's wall clock, display only
	CompletedAt time.Time // likewise; zero while in progress
	Retention   time.Duration
	Result      []byte
}
