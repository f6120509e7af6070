package torture

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/history"
)

// The primitives, as Op.Prim names them.
const (
	primLease    = "lease"
	primKV       = "kv"
	primQueue    = "queue"
	primGroup    = "group"
	primElection = "election"
	primIdem     = "idem"
	primFault    = "fault"
)

// worker is one client of the workload: its own Go client (and so its
// own connections: the node it last spoke to is the node that answered).
type worker struct {
	id   int
	c    *client.Client
	last *lastHost
	rng  *rand.Rand
	rec  *recorder
	run  *run
	n    int64 // keys made so far

	// kv: the versions this worker last saw per register group, and a
	// key to read next (-1: none) after an answer it could not place.
	known  [kvGroups][history.TxnKeys]uint64
	reread [kvGroups]int
}

// lastHost remembers the host of the last request that got a response.
type lastHost struct {
	http.RoundTripper
	host atomic.Value // string
}

func (l *lastHost) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.RoundTripper.RoundTrip(req)
	if err == nil {
		l.host.Store(req.URL.Host)
	}
	return resp, err
}

func (l *lastHost) node() string {
	s, _ := l.host.Load().(string)
	return s
}

// call runs f as one recorded operation of prim and returns it (with its
// id), its result classified from the error f returned.
func (w *worker) call(prim, name, key string, in map[string]any, f func() (map[string]any, error)) (Op, error) {
	op := Op{Worker: w.id, Prim: prim, Op: name, Key: key, In: in, Invoke: w.rec.now()}
	out, err := f()
	op.Return = w.rec.now()
	op.Node = w.last.node()
	op.Out = out
	op.Result = classify(err)
	if err != nil {
		op.Err = err.Error()
	}
	op.ID = w.rec.add(op)
	return op, err
}

// classify names an error's result: a definite refusal (a wait that ran
// out is one: its end is a log entry too), or no answer (the operation
// may have taken effect, or may yet).
func classify(err error) string {
	if err == nil {
		return resultOK
	}
	if errors.Is(err, client.ErrInProgress) {
		return resultRefused
	}
	switch leasehold.CodeOf(err) {
	case leasehold.CodeUnavailable, leasehold.CodeCanceled, leasehold.CodeUnknown:
		return resultUnknown
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return resultUnknown
	}
	return resultRefused
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// opCtx bounds one call: long enough to ride out a leader election.
func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
}

// safeEnd is the end of a hold's client-side safe window that started
// before sent, for a grant of ttl: the client's drift allowance off.
func safeEnd(sent int64, ttl time.Duration) int64 {
	margin := clientDrift + time.Duration(float64(ttl)*clientDriftRatio)
	return sent + int64(ttl-margin)
}

// seq numbers this worker's keys.
func (w *worker) seq() int64 {
	w.n++
	return w.n
}

// safeTTL is how long a grant of ttl is safe on the client's side.
func safeTTL(ttl time.Duration) time.Duration { return time.Duration(safeEnd(0, ttl)) }
