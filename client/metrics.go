package client

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the client-side counters; they count into nothing unless a
// Registerer was given.
type metrics struct {
	acquisitions    *prometheus.CounterVec
	renewalFailures prometheus.Counter
	leasesLost      prometheus.Counter
	workAfterLoss   prometheus.Counter
	degraded        prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		acquisitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_client_acquisitions_total", Help: "Acquire calls by outcome.",
		}, []string{"outcome"}),
		renewalFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_client_renewal_failures_total", Help: "Renewal attempts that failed.",
		}),
		leasesLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_client_leases_lost_total", Help: "Leases that ended before their holder released them.",
		}),
		workAfterLoss: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_client_work_after_loss_total", Help: "Releases that found the lease already gone: work finished after lease loss.",
		}),
		degraded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_client_degraded_leases_total", Help: "Leases handed out degraded (token 0) under FailOpen.",
		}),
	}
	if reg != nil {
		m.acquisitions = register(reg, m.acquisitions)
		m.renewalFailures = register(reg, m.renewalFailures)
		m.leasesLost = register(reg, m.leasesLost)
		m.workAfterLoss = register(reg, m.workAfterLoss)
		m.degraded = register(reg, m.degraded)
	}
	return m
}

// register adds c to reg, or returns the collector already registered
// there, so several clients can share one registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
