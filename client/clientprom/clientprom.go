// Package clientprom counts the Go client's events into a Prometheus
// registry: client.Config{Metrics: clientprom.New(reg)}. It is a module of
// its own (github.com/leasehold/leasehold/client/clientprom), so a
// program that uses the client without Prometheus does not pull
// Prometheus's modules.
//
// The counters: leasehold_client_acquisitions_total{outcome},
// leasehold_client_renewal_failures_total,
// leasehold_client_leases_lost_total,
// leasehold_client_work_after_loss_total and
// leasehold_client_degraded_leases_total. Several clients given the same
// registry share them.
package clientprom

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/client"
)

// Metrics is client.Metrics on Prometheus counters.
type Metrics struct {
	acquisitions    *prometheus.CounterVec
	renewalFailures prometheus.Counter
	leasesLost      prometheus.Counter
	workAfterLoss   prometheus.Counter
	degraded        prometheus.Counter
}

var _ client.Metrics = (*Metrics)(nil)

// New makes the client's counters and registers them with reg, or takes
// the ones already registered there (so several clients can share one
// registry). A nil reg registers them nowhere. It panics if reg holds
// other collectors under the same names.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
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

func (m *Metrics) Acquisition(outcome string) { m.acquisitions.WithLabelValues(outcome).Inc() }
func (m *Metrics) RenewalFailure()            { m.renewalFailures.Inc() }
func (m *Metrics) LeaseLost()                 { m.leasesLost.Inc() }
func (m *Metrics) WorkAfterLoss()             { m.workAfterLoss.Inc() }
func (m *Metrics) Degraded()                  { m.degraded.Inc() }

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
