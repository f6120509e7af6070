package nodemetrics

import (
	"errors"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Every series in Metrics is made and registered by New: a field left
// nil, or made but never registered, is a metric nobody can scrape.
func TestEveryMetricsFieldIsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	v := reflect.ValueOf(m).Elem()
	collector := reflect.TypeFor[prometheus.Collector]()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() || !f.Type.Implements(collector) {
			continue
		}
		c, _ := v.Field(i).Interface().(prometheus.Collector)
		if v.Field(i).IsNil() || c == nil {
			t.Errorf("Metrics.%s is never set", f.Name)
			continue
		}
		var already prometheus.AlreadyRegisteredError
		if err := reg.Register(c); !errors.As(err, &already) {
			t.Errorf("Metrics.%s is not registered by New (register: %v)", f.Name, err)
		}
	}
}
