package fsm

import "testing"

// Each row of the table of commands makes a command of its own kind, under
// a name no other row has.
func TestCommandTable(t *testing.T) {
	names := map[string]Kind{}
	for k, row := range commands {
		if row.new == nil {
			if row.name != "" {
				t.Errorf("kind %d is named %q but has no constructor", k, row.name)
			}
			continue
		}
		if got := row.new().Kind(); got != Kind(k) {
			t.Errorf("the row of kind %d makes a command of kind %d", k, got)
		}
		if other, dup := names[row.name]; dup || row.name == "" {
			t.Errorf("kind %d is named %q, like kind %d (or not at all)", k, row.name, other)
		}
		names[row.name] = Kind(k)
		if Kind(k).String() != row.name {
			t.Errorf("Kind(%d).String() = %q, want %q", k, Kind(k).String(), row.name)
		}
	}
	if KindRaiseTokens.String() != "raise-tokens" || Kind(200).String() != "unknown ignorable kind" || Kind(99).String() != "unknown kind" {
		t.Errorf("kind names: %v %v %v", KindRaiseTokens, Kind(200), Kind(99))
	}
}
