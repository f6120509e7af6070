package torture

import (
	"bufio"
	"encoding/json"
	"io"
	"maps"
	"sync"
	"time"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/bench"
	"github.com/leasehold/leasehold/internal/history"
)

// Results of an operation.
const (
	resultOK      = "ok"      // the service answered success
	resultRefused = "refused" // the service answered a definite no (held, stale, not found...)
	resultUnknown = "unknown" // no answer: it may or may not have taken effect
)

// Op is one operation in the history, as saved (one JSON line each) with
// --history. Times are nanoseconds on this process's monotonic clock from
// the start of the run; Node is the node the client last spoke to for
// it.
type Op struct {
	ID     int64          `json:"id"`
	Worker int            `json:"worker"`
	Prim   string         `json:"prim"`
	Op     string         `json:"op"`
	Invoke int64          `json:"invoke_ns"`
	Return int64          `json:"return_ns"`
	Node   string         `json:"node,omitempty"`
	Key    string         `json:"key,omitempty"`
	In     map[string]any `json:"in,omitempty"`
	Out    map[string]any `json:"out,omitempty"`
	Result string         `json:"result"`
	Err    string         `json:"err,omitempty"`
}

// primStats are one primitive's operation counts and latencies.
type primStats struct {
	ops, ok, refused, unknown int64
	lat                       bench.Hist
}

// recorder keeps the history: every operation (and writes it to the
// history file as it goes), and the typed records the checkers read. Its
// methods are safe for concurrent use.
type recorder struct {
	start time.Time

	mu     sync.Mutex
	out    *bufio.Writer // nil: no history file
	outErr error
	ops    []Op
	stats  map[string]*primStats

	recs records
	txn  *history.TxnHistory // safe for concurrent use itself
}

// records are the typed records the checkers read.
type records struct {
	grants     []history.Grant // leases and partition epochs, for stale writes
	writes     []history.Write
	holds      map[string][]history.Hold // by primitive
	qSends     []history.QueueSend
	qDelivered []history.QueueDelivery
	qAcks      []history.QueueAck
	completes  []history.IdemComplete
	answers    []history.IdemAnswer
	faults     []faultRecord
}

func newRecorder(w io.Writer) *recorder {
	r := &recorder{start: time.Now(), stats: map[string]*primStats{}, recs: records{holds: map[string][]history.Hold{}},
		txn: history.NewTxnHistory()}
	if w != nil {
		r.out = bufio.NewWriter(w)
	}
	return r
}

// now is the time since the run started, on the monotonic clock.
func (r *recorder) now() int64 { return time.Since(r.start).Nanoseconds() }

// add numbers op, keeps it, writes it to the history file and counts it.
func (r *recorder) add(op Op) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.ID = int64(len(r.ops)) + 1
	r.ops = append(r.ops, op)
	if r.out != nil && r.outErr == nil {
		b, _ := json.Marshal(op)
		_, r.outErr = r.out.Write(append(b, '\n'))
	}
	if op.Prim == primFault {
		return op.ID
	}
	s := r.stats[op.Prim]
	if s == nil {
		s = &primStats{}
		r.stats[op.Prim] = s
	}
	s.ops++
	switch op.Result {
	case resultOK:
		s.ok++
	case resultRefused:
		s.refused++
	default:
		s.unknown++
	}
	if op.Op != opOwn { // a span of ownership, not a call
		s.lat.Record(time.Duration(op.Return - op.Invoke))
	}
	return op.ID
}

// flush writes out what the history file has buffered.
func (r *recorder) flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out == nil {
		return nil
	}
	if err := r.out.Flush(); err != nil && r.outErr == nil {
		r.outErr = err
	}
	return r.outErr
}

// op is the recorded operation id (1-based).
func (r *recorder) op(id int64) (Op, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < 1 || id > int64(len(r.ops)) {
		return Op{}, false
	}
	return r.ops[id-1], true
}

// count is the number of operations recorded (faults not included).
func (r *recorder) count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, s := range r.stats {
		n += s.ops
	}
	return n
}

// keep appends v to one of r's lists, under r's lock.
func keep[T any](r *recorder, list *[]T, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, v)
}

func (r *recorder) grant(g history.Grant)             { keep(r, &r.recs.grants, g) }
func (r *recorder) wrote(w history.Write)             { keep(r, &r.recs.writes, w) }
func (r *recorder) sent(s history.QueueSend)          { keep(r, &r.recs.qSends, s) }
func (r *recorder) delivered(d history.QueueDelivery) { keep(r, &r.recs.qDelivered, d) }
func (r *recorder) acked(a history.QueueAck)          { keep(r, &r.recs.qAcks, a) }
func (r *recorder) completed(c history.IdemComplete)  { keep(r, &r.recs.completes, c) }
func (r *recorder) answered(a history.IdemAnswer)     { keep(r, &r.recs.answers, a) }
func (r *recorder) fault(f faultRecord)               { keep(r, &r.recs.faults, f) }

func (r *recorder) hold(prim string, h history.Hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs.holds[prim] = append(r.recs.holds[prim], h)
}

// records is what has been recorded so far. The lists only grow, so the
// copy's slices stay as they are.
func (r *recorder) records() records {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.recs
	c.holds = maps.Clone(r.recs.holds)
	return c
}

// at is t (a reading of this process's clock) as recorder time.
func (r *recorder) at(t time.Time) int64 { return t.Sub(r.start).Nanoseconds() }
