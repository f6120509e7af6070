package fsm

// names interns the strings that many leases share (owners, operations):
// each lease decoded from the log brings its own copy, and a few thousand
// workers hold a hundred thousand leases. A name stays while a lease
// uses it, with the count of those leases. The entries are values, so a
// name that comes and goes with one lease (a lock workload) costs no
// allocation.
type names map[string]nameRef

type nameRef struct {
	s string
	n int
}

// take returns the kept copy of s, keeping s if it is new, and counts one
// more user.
func (m names) take(s string) string {
	r, ok := m[s]
	if !ok {
		r.s = s
	}
	r.n++
	m[s] = r
	return r.s
}

// drop counts one user less, forgetting s after its last.
func (m names) drop(s string) {
	if r, ok := m[s]; ok {
		if r.n--; r.n <= 0 {
			delete(m, s)
		} else {
			m[s] = r
		}
	}
}

// count is the number of users of s.
func (m names) count(s string) int { return m[s].n }
