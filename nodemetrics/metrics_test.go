package nodemetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/internal/testutil"
)

// Every series in Metrics is made and registered by New: a field left
// nil, or made but never registered, is a metric nobody can scrape.
func TestEveryMetricsFieldIsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	testutil.FieldsRegistered(t, reg, New(reg), "New")
}
