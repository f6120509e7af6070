package fsm

import (
	"iter"
	"sort"
)

// cowMap is a map that a snapshot captures in O(1) (capture.go). While a
// capture holds it (frozen), the map as captured (base) is not written:
// writes go to an overlay, and a value about to change in place is copied
// into it first (mut), so the snapshot reads base off the apply path while
// Apply goes on. Once the capture is released, the overlay is folded back
// into base a few entries at each Apply (thawStep), never all at once: at
// a million leases, a Persist of some seconds leaves hundreds of
// thousands of renewed leases in the overlay, and folding them in one
// Apply held it up for a quarter of a second. Until the fold ends, a
// write lands in base and takes its key out of the overlay, so the
// overlay only shrinks. With no capture out and nothing left to fold it
// is a plain map, at no cost per item.
//
// Values are pointers that change in place (a lease's renew count) or
// plain values; only mut may hand out a value to change.
type cowMap[K comparable, V any] struct {
	base map[K]V
	over map[K]cowEntry[V] // entries newer than base (nil: none)
	n    int
	// frozen: a capture not yet released reads base, so nothing may write
	// it; else over holds what is left to fold.
	frozen bool
}

type cowEntry[V any] struct {
	v    V
	gone bool // deleted since the capture
}

func newCowMap[K comparable, V any]() cowMap[K, V] {
	return cowMap[K, V]{base: make(map[K]V)}
}

func (m *cowMap[K, V]) get(k K) (V, bool) {
	if m.over != nil {
		if e, ok := m.over[k]; ok {
			return e.v, !e.gone
		}
	}
	v, ok := m.base[k]
	return v, ok
}

// at is get without the flag: the zero value when k is absent.
func (m *cowMap[K, V]) at(k K) V {
	v, _ := m.get(k)
	return v
}

func (m *cowMap[K, V]) has(k K) bool {
	_, ok := m.get(k)
	return ok
}

func (m *cowMap[K, V]) len() int { return m.n }

func (m *cowMap[K, V]) set(k K, v V) {
	if !m.has(k) {
		m.n++
	}
	switch {
	case m.frozen:
		m.over[k] = cowEntry[V]{v: v}
	case m.over != nil:
		delete(m.over, k)
		m.base[k] = v
	default:
		m.base[k] = v
	}
}

func (m *cowMap[K, V]) del(k K) {
	if !m.has(k) {
		return
	}
	m.n--
	if !m.frozen {
		if m.over != nil {
			delete(m.over, k)
		}
		delete(m.base, k)
		return
	}
	if _, inBase := m.base[k]; inBase {
		m.over[k] = cowEntry[V]{gone: true}
	} else {
		delete(m.over, k)
	}
}

// mut returns k's value to change in place: while frozen, a copy kept in
// the overlay, so the captured one stays as it was.
func (m *cowMap[K, V]) mut(k K) (V, bool) {
	if m.over != nil {
		if e, ok := m.over[k]; ok {
			if !m.frozen && !e.gone { // nobody reads base: fold it now
				delete(m.over, k)
				m.base[k] = e.v
			}
			return e.v, !e.gone
		}
	}
	v, ok := m.base[k]
	if !ok || !m.frozen {
		return v, ok
	}
	v = cloneValue(v)
	m.over[k] = cowEntry[V]{v: v}
	return v, true
}

// each visits every entry, in no order, until f returns false.
func (m *cowMap[K, V]) each(f func(K, V) bool) {
	for k, v := range m.base {
		if m.over != nil {
			if _, changed := m.over[k]; changed {
				continue
			}
		}
		if !f(k, v) {
			return
		}
	}
	for k, e := range m.over {
		if !e.gone && !f(k, e.v) {
			return
		}
	}
}

// all ranges over every entry, in no order.
func (m *cowMap[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) { m.each(yield) }
}

// freeze makes the map as it is the captured one (the returned view) and
// sends later writes to an overlay. What is left to fold from an earlier
// capture is folded first (it costs what that capture left, as a whole
// fold did before thawStep); freezing a map that a capture not yet
// released holds builds a new base, in the map's time.
func (m *cowMap[K, V]) freeze() cowMap[K, V] {
	switch {
	case m.frozen:
		base := make(map[K]V, m.n)
		m.each(func(k K, v V) bool { base[k] = v; return true })
		m.base = base
	case m.over != nil:
		m.thawStep(len(m.over))
	}
	m.over, m.frozen = make(map[K]cowEntry[V]), true
	return cowMap[K, V]{base: m.base, n: m.n}
}

// unfreeze says no capture reads base any more: what is in the overlay
// may be folded (thawStep), and writes go to base again.
func (m *cowMap[K, V]) unfreeze() { m.frozen = false }

// thawStep folds up to budget entries of the overlay into base, once no
// capture reads base, and returns how many it folded.
func (m *cowMap[K, V]) thawStep(budget int) int {
	if m.frozen || m.over == nil {
		return 0
	}
	n := 0
	for k, e := range m.over {
		if n == budget {
			return n
		}
		if e.gone {
			delete(m.base, k)
		} else {
			m.base[k] = e.v
		}
		delete(m.over, k)
		n++
	}
	m.over = nil
	return n
}

// overlay is how many entries the overlay holds.
func (m *cowMap[K, V]) overlay() int { return len(m.over) }

// thawing reports whether the overlay still holds entries to fold.
func (m *cowMap[K, V]) thawing() bool { return !m.frozen && m.over != nil }

// sortedCowKeys lists a map's keys in order, so it is written alike on
// every node.
func sortedCowKeys[V any](m *cowMap[string, V]) []string {
	keys := make([]string, 0, m.len())
	m.each(func(k string, _ V) bool { keys = append(keys, k); return true })
	sort.Strings(keys)
	return keys
}

// writeSortedCow is writeSorted for a cowMap.
func writeSortedCow[V any](e *encoder, m *cowMap[string, V], write func(k string, v V)) {
	keys := sortedCowKeys(m)
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		write(k, m.at(k))
		e.spill()
	}
}
