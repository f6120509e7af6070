package fsm

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"unsafe"
)

// The snapshot version is the newest section layout, and every section is
// readable from the oldest version: raising one section's layout without
// raising snapVersion would let an old node misread a new snapshot.
func TestSnapshotVersionIsNewestSectionLayout(t *testing.T) {
	newest := byte(0)
	names := map[string]bool{}
	for _, sec := range sections {
		if sec.name == "" || names[sec.name] || sec.write == nil || sec.read == nil {
			t.Fatalf("section %q is unnamed, named twice or lacks a writer or reader", sec.name)
		}
		names[sec.name] = true
		if sec.layout < snapOldest || sec.layout > snapVersion {
			t.Fatalf("section %q has layout %d, outside the versions read (%d to %d)", sec.name, sec.layout, snapOldest, snapVersion)
		}
		newest = max(newest, sec.layout)
	}
	if newest != snapVersion {
		t.Fatalf("snapVersion is %d but the newest section layout is %d", snapVersion, newest)
	}
}

// A State holds replicated state only: a restored state equals the one
// that wrote the snapshot, field by field, and each sub-state's fields
// likewise. (A counter kept for this replica's metrics would differ
// here.) The observer hooks, the scratch buffer, the snapshots' account
// and the config belong to the node; a sub-state's pointer back to its
// State is no state; the dedup window keeps dead slots that a snapshot
// drops, so it is compared by its records.
func TestRestoredStateEqualsOriginal(t *testing.T) {
	s := New(DefaultConfig(), nil)
	for i, b := range goldenEntries() {
		s.Apply(uint64(i+1), b)
	}
	restored, err := Restore(s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// now is the applying entry's time, meaningful only inside Apply.
	nodeOnly := map[string]bool{"cfg": true, "hooks": true, "scratch": true, "snaps": true, "dedup": true, "now": true, "st": true}
	var compare func(where string, a, b reflect.Value)
	compare = func(where string, a, b reflect.Value) {
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if nodeOnly[f.Name] {
				continue
			}
			if _, isPart := reflect.New(f.Type).Interface().(part); isPart {
				compare(where+"."+f.Name, fieldValue(a, i), fieldValue(b, i))
				continue
			}
			if !reflect.DeepEqual(fieldOf(a, i), fieldOf(b, i)) {
				t.Errorf("%s.%s differs after a restore: it is not replicated state", where, f.Name)
			}
		}
	}
	compare("State", reflect.ValueOf(s).Elem(), reflect.ValueOf(restored).Elem())
	var want, got []string
	s.dedup.each(func(r *dedupRec) { want = append(want, fmt.Sprintf("%q %d %x", r.key, r.kind, r.sum)) })
	restored.dedup.each(func(r *dedupRec) { got = append(got, fmt.Sprintf("%q %d %x", r.key, r.kind, r.sum)) })
	if !slices.Equal(want, got) {
		t.Fatalf("dedup records after a restore:\n%q\nwant\n%q", got, want)
	}
}

// fieldOf reads an unexported field for comparison.
func fieldOf(v reflect.Value, i int) any { return fieldValue(v, i).Interface() }

func fieldValue(v reflect.Value, i int) reflect.Value {
	f := v.Field(i)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}
