package main

import "time"

// meter reads what the servers of a target have used: CPU, and heap
// allocations where they are Go programs (mallocs nil otherwise).
type meter struct {
	cpu     func() time.Duration
	mallocs func() int64
}

func (s *servers) meter() meter {
	return meter{cpu: s.cpu, mallocs: func() int64 { return nodeMallocs(s.endpoints) }}
}

// usage is what the servers and this process (the clients) used in a
// measured window; allocations -1 where they could not be counted.
type usage struct {
	nodeCPU, clientCPU       time.Duration
	nodeAllocs, clientAllocs int64
}

// window reads the meter at from and at to, and sends what was used in
// between.
func (m meter) window(from, to time.Time) <-chan usage {
	ch := make(chan usage, 1)
	go func() {
		time.Sleep(time.Until(from))
		n0, c0, a0, s0 := m.cpu(), selfCPU(), m.allocs(), selfMallocs()
		time.Sleep(time.Until(to))
		n1, c1, a1, s1 := m.cpu(), selfCPU(), m.allocs(), selfMallocs()
		u := usage{nodeCPU: n1 - n0, clientCPU: c1 - c0, nodeAllocs: -1, clientAllocs: s1 - s0}
		if a0 >= 0 && a1 >= 0 {
			u.nodeAllocs = a1 - a0
		}
		ch <- u
	}()
	return ch
}

func (m meter) allocs() int64 {
	if m.mallocs == nil {
		return -1
	}
	return m.mallocs()
}

// per sets r's CPU and allocations per operation, for n operations.
func (u usage) per(r *result, n int) {
	r.NodeAllocs, r.ClientAllocs = -1, -1
	if n <= 0 {
		return
	}
	r.NodeCPU, r.ClientCPU = u.nodeCPU/time.Duration(n), u.clientCPU/time.Duration(n)
	if u.nodeAllocs >= 0 {
		r.NodeAllocs = float64(u.nodeAllocs) / float64(n)
	}
	r.ClientAllocs = float64(u.clientAllocs) / float64(n)
}
