package fsm

import "crypto/sha256"

// renewDigest stands for the key of a lease's last renewal (its request
// ID scoped to its caller): 16 bytes inline instead of the ~60-byte
// string every held lease would keep, replaced at each renewal. The zero
// digest is no renewal.
type renewDigest [16]byte

func digestRenewKey(key string) renewDigest {
	if key == "" {
		return renewDigest{}
	}
	h := sha256.Sum256([]byte(key))
	return renewDigest(h[:16])
}

// String is the digest as the lease snapshot section writes it: 16 bytes,
// or empty for none.
func (r renewDigest) String() string {
	if r == (renewDigest{}) {
		return ""
	}
	return string(r[:])
}

// readRenewDigest reads the snapshot's renewal key: a digest, or a full
// key from a snapshot written before digests. A scoped key is never 16
// bytes long (a marker byte, the caller and half the secret's hash come
// first); a legacy bare ID of 16 bytes would be taken for a digest and
// its retry would renew again, which is safe (see lease.renewKey).
func readRenewDigest(s string) renewDigest {
	if len(s) == len(renewDigest{}) {
		return renewDigest([]byte(s))
	}
	return digestRenewKey(s)
}
