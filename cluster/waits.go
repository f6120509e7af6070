package cluster

import (
	"sync"

	"github.com/leasehold/leasehold/fsm"
)

// waits connects a request blocked on a queued acquire to the entry that
// ends its wait. Requests register before proposing, so an outcome applied
// in the same entry as the enqueue is never missed.
type waits struct {
	mu sync.Mutex
	m  map[string][]chan fsm.Result
}

func newWaits() *waits { return &waits{m: make(map[string][]chan fsm.Result)} }

// watch returns a channel that receives the outcome of the waiting acquire
// with this request ID, and a function to stop watching.
func (w *waits) watch(requestID string) (<-chan fsm.Result, func()) {
	ch := make(chan fsm.Result, 1)
	w.mu.Lock()
	w.m[requestID] = append(w.m[requestID], ch)
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		chs := w.m[requestID]
		for i, c := range chs {
			if c == ch {
				chs = append(chs[:i], chs[i+1:]...)
				break
			}
		}
		if len(chs) == 0 {
			delete(w.m, requestID)
		} else {
			w.m[requestID] = chs
		}
	}
}

func (w *waits) deliver(requestID string, r fsm.Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.m[requestID] {
		select {
		case ch <- r:
		default:
		}
	}
}
