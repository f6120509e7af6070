package httpfence

import (
	"context"
	"sync"
)

// MemoryStore keeps marks in memory. It is safe for concurrent use, and its
// zero value is ready. It suits one process; its marks are lost when the
// process ends (after a restart the first token for a resource is accepted,
// whatever it is) and are not shared with other replicas: use a
// pgfence.Store for those. Marks are never forgotten, since forgetting one
// would let an older token pass again, so memory grows with the number of
// resources seen.
type MemoryStore struct {
	mu    sync.Mutex
	marks map[string]uint64
}

// Advance applies the rule; see Store.
func (m *MemoryStore) Advance(_ context.Context, resource string, token uint64) (uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.marks[resource]; ok && token < cur {
		return cur, false, nil
	}
	if m.marks == nil {
		m.marks = make(map[string]uint64)
	}
	m.marks[resource] = token
	return token, true, nil
}

// Current returns resource's mark, and false if it has none.
func (m *MemoryStore) Current(resource string) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.marks[resource]
	return t, ok
}
