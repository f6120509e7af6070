package service

import (
	"sync"
	"time"

	"github.com/leasehold/leasehold/fsm"
)

// places holds the places in line that Batch answered "queued", until the
// caller follows up by sending the same request to Acquire. A place nobody
// follows up within withdrawGrace is withdrawn, like the place of any
// caller that went away; otherwise it would be granted later, to nobody,
// and held for its TTL.
type places struct {
	mu sync.Mutex
	m  map[string]*time.Timer // by fsm.Acquire.Key
}

func newPlaces() *places { return &places{m: make(map[string]*time.Timer)} }

// hold starts the grace of the place cmd took; withdraw runs if nobody
// claims it in time.
func (p *places) hold(cmd *fsm.Acquire, grace time.Duration, withdraw func()) {
	key := cmd.Key()
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.m[key]; old != nil {
		old.Stop() // the same request queued again by a retried batch
	}
	var t *time.Timer
	t = time.AfterFunc(grace, func() {
		p.mu.Lock()
		mine := p.m[key] == t
		if mine {
			delete(p.m, key)
		}
		p.mu.Unlock()
		if mine {
			withdraw()
		}
	})
	p.m[key] = t
}

// claim takes the place held for key over: its withdrawal is called off.
// It reports false if no place is held here, or its grace already ran out.
func (p *places) claim(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.m[key]
	if t == nil {
		return false
	}
	delete(p.m, key)
	return t.Stop()
}
