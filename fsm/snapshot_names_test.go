package fsm

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/api/leasehold"
)

// leasehold's own names are printable, under the reserved prefix, and
// name their group and member (or key) back, whatever "/" and "%" the
// group's name holds; names written before version 14 read as the new.
func TestReservedNames(t *testing.T) {
	for _, g := range []string{"shards", "a/b", "50%", "%2F", "x/%25/", "日本"} {
		for _, m := range []string{"w1", "a/b", "%"} {
			r := GroupMemberResource(g, m)
			if !strings.HasPrefix(r, leasehold.ReservedPrefix+"group/") || leasehold.ValidateName("r", r, 1<<10, true) != nil {
				t.Errorf("GroupMemberResource(%q, %q) = %q: not a printable name under the prefix", g, m, r)
			}
			if gg, mm, ok := GroupMemberOf(r); !ok || gg != g || mm != m {
				t.Errorf("GroupMemberOf(%q) = %q, %q, %v; want %q, %q", r, gg, mm, ok, g, m)
			}
			if !strings.HasPrefix(r, GroupResource(g)) || (g != "a/b" && strings.HasPrefix(r, GroupResource("a"))) {
				t.Errorf("%q is not under its group's resource %q alone", r, GroupResource(g))
			}
			if got := legacyName("\x00group/" + g + "\x00" + m); got != r {
				t.Errorf("the old name of %q/%q reads as %q, want %q", g, m, got, r)
			}
			if err := ValidateForcedResource(r); err != nil {
				t.Errorf("ValidateForcedResource(%q): %v", r, err)
			}
		}
	}
	groupPrefix := leasehold.ReservedPrefix + "group/"
	for _, bad := range []string{GroupResource("g"), groupPrefix + "a%2fb/m", groupPrefix + "a%/m", groupPrefix + "nomember"} {
		if g, m, ok := GroupMemberOf(bad); ok {
			t.Errorf("GroupMemberOf(%q) = %q, %q: a name GroupMemberResource never makes", bad, g, m)
		}
	}
	long := strings.Repeat("k", MaxIdemKeyLen)
	for old, want := range map[string]string{
		"\x00group/g\x00": GroupResource("g"), "\x00idem/pay/1": IdemResource("pay/1"), "\x00idem/" + long: IdemResource(long),
		"plain": "plain", "": "", "\x00other": "\x00other",
	} {
		if got := legacyName(old); got != want {
			t.Errorf("legacyName(%q) = %q, want %q", old, got, want)
		}
	}
	if err := ValidateForcedResource(IdemResource(long)); err != nil {
		t.Errorf("the attempt of the longest key cannot be named: %v", err)
	}
}
