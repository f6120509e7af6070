package client

import (
	"math/rand/v2"
	"time"
)

// The retry pause: full jitter (a random pause from 0 to min(cap,
// base·2^n)), so that clients that failed together, as after a failover,
// do not retry together. (cenkalti/backoff jitters around the interval
// and owns the retry loop; ours moves endpoints and follows leader hints,
// so a few lines serve better.)
const (
	backoffBase = 20 * time.Millisecond
	backoffCap  = time.Second
)

// backoff counts the failed attempts of one retry loop; its zero value
// is ready, and zeroing it starts again from the base.
type backoff struct{ n int }

// next is the pause before the next attempt: random in [0, min(cap,
// base·2^n)).
func (b *backoff) next() time.Duration {
	ceiling := backoffCap
	if b.n < 16 { // 20ms·2^6 already passes the cap; no overflow
		ceiling = min(backoffCap, backoffBase<<b.n)
	}
	b.n++
	return rand.N(ceiling)
}
