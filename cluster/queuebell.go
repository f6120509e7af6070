package cluster

import "sync"

// bell wakes the Receives that long-poll a queue when an applied entry
// leaves it with a message ready (fsm.QueueObserver.QueueReady): each
// waiter holds the queue's current channel, and a ring closes it and
// starts a new one. Ringing a queue nobody waits on costs a map lookup.
type bell struct {
	mu    sync.Mutex
	rings map[string]chan struct{}
}

func newBell() *bell { return &bell{rings: make(map[string]chan struct{})} }

// wait returns a channel closed at the next ring of queue.
func (b *bell) wait(queue string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.rings[queue]
	if c == nil {
		c = make(chan struct{})
		b.rings[queue] = c
	}
	return c
}

func (b *bell) ring(queue string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.rings[queue]; c != nil {
		close(c)
		delete(b.rings, queue)
	}
}

// ringAll wakes every waiter, as when a snapshot replaced the state.
func (b *bell) ringAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for q, c := range b.rings {
		close(c)
		delete(b.rings, q)
	}
}

// QueueReady returns a channel closed when an entry applied on this node
// next leaves queue with a message ready (or maybe ready later: see
// fsm.State.NextReady). Take it before reading the queue, so that a send
// applied after the read is not missed.
func (n *Node) QueueReady(queue string) <-chan struct{} { return n.m.bell.wait(queue) }
