package testutil

import (
	"errors"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// FieldsRegistered fails t for every exported collector field of the
// struct metrics points to that is nil, or that ctor (named for the
// message) did not register on reg: a metric nobody can scrape.
func FieldsRegistered(t testing.TB, reg prometheus.Registerer, metrics any, ctor string) {
	t.Helper()
	v := reflect.ValueOf(metrics).Elem()
	collector := reflect.TypeFor[prometheus.Collector]()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() || !f.Type.Implements(collector) {
			continue
		}
		c, _ := v.Field(i).Interface().(prometheus.Collector)
		if v.Field(i).IsNil() || c == nil {
			t.Errorf("%s.%s is never set", v.Type().Name(), f.Name)
			continue
		}
		var already prometheus.AlreadyRegisteredError
		if err := reg.Register(c); !errors.As(err, &already) {
			t.Errorf("%s.%s is not registered by %s (register: %v)", v.Type().Name(), f.Name, ctor, err)
		}
	}
}
