package fsm

import "testing"

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
