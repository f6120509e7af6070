package clientprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/client/clientprom"
)

// counts gathers reg's counters by name and outcome label.
func counts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out
}

// TestMetricsCountUnderTheClientNames: each client.Metrics call counts
// on its leasehold_client_* counter, and two clients given one registry
// share the counters (the second New takes the registered ones).
func TestMetricsCountUnderTheClientNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	var a, b client.Metrics = clientprom.New(reg), clientprom.New(reg)
	a.Acquisition("granted")
	b.Acquisition("granted")
	b.Acquisition("wait_timeout")
	a.RenewalFailure()
	b.LeaseLost()
	a.WorkAfterLoss()
	b.Degraded()
	want := map[string]float64{
		"leasehold_client_acquisitions_total{outcome=granted}":      2,
		"leasehold_client_acquisitions_total{outcome=wait_timeout}": 1,
		"leasehold_client_renewal_failures_total":                   1,
		"leasehold_client_leases_lost_total":                        1,
		"leasehold_client_work_after_loss_total":                    1,
		"leasehold_client_degraded_leases_total":                    1,
	}
	got := counts(t, reg)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("counters %v, want exactly %v", got, want)
	}
	clientprom.New(nil).Acquisition("granted") // registered nowhere: no panic
}
