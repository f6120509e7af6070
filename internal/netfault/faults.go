package netfault

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Faults are what one direction of a link does to the bytes it carries.
// The zero value passes them on at once.
type Faults struct {
	// Hold stops the bytes until it is lifted; then what was held is
	// delivered in order. A connection whose opener's direction is held
	// reaches its target only once it flows.
	Hold bool
	// Delay is how long after the proxy reads a chunk it is delivered,
	// give or take Jitter (uniform), never before the chunk ahead of it.
	Delay, Jitter time.Duration
	// Loss is the probability that a chunk is lost and resent after RTO
	// (doubling while the resend is lost too, at most maxResends times).
	Loss float64
}

// RTO is the retransmission timeout a lost chunk waits: Linux's minimum.
const RTO = 200 * time.Millisecond

// maxResends bounds the stall of one chunk (200ms doubled 5 times: 6.2s
// in all), as TCP gives up on a connection after enough resends.
const maxResends = 5

// Validate reports a setting that makes no sense.
func (f Faults) Validate() error {
	switch {
	case f.Delay < 0 || f.Jitter < 0:
		return fmt.Errorf("netfault: delay %v and jitter %v must not be negative", f.Delay, f.Jitter)
	case f.Jitter > f.Delay:
		return fmt.Errorf("netfault: jitter %v is more than the delay %v: a chunk cannot arrive before it was sent", f.Jitter, f.Delay)
	case f.Loss < 0 || f.Loss >= 1:
		return fmt.Errorf("netfault: loss %v must be in [0, 1)", f.Loss)
	}
	return nil
}

// String is the faults as a test log shows them.
func (f Faults) String() string {
	var s []string
	if f.Hold {
		s = append(s, "held")
	}
	if f.Delay > 0 {
		s = append(s, fmt.Sprintf("delay %v±%v", f.Delay, f.Jitter))
	}
	if f.Loss > 0 {
		s = append(s, fmt.Sprintf("loss %g%%", 100*f.Loss))
	}
	if len(s) == 0 {
		return "clear"
	}
	return strings.Join(s, ", ")
}

// lag is how long after its read a chunk is due: the delay with its
// jitter, plus a retransmission timeout for every time it is lost.
func (f Faults) lag(rnd *rand.Rand) time.Duration {
	d := f.Delay
	if f.Jitter > 0 {
		d += time.Duration(rnd.Int64N(int64(2*f.Jitter)+1)) - f.Jitter
	}
	rto := RTO
	for range maxResends {
		if f.Loss == 0 || rnd.Float64() >= f.Loss {
			break
		}
		d += rto
		rto *= 2
	}
	return d
}
