package fsm

import "strings"

// Version 14 names the leases leasehold makes for itself under
// leasehold.ReservedPrefix ("@leasehold/group/G/M", "@leasehold/idem/K");
// before, they began with a zero byte ("\x00group/G\x00M",
// "\x00idem/K"), which no terminal, grep or URL could carry. An older
// snapshot or log entry is read with the new names: legacyName is applied
// wherever a resource name is decoded (a lease's resources, a lock-delay,
// a waiter's resources, an audit record, a forced release), so every node
// reaches the same state from the same bytes, old or new.
const reservedNamesVersion = 14

// The shapes of the first internal names.
const (
	legacyGroupPrefix = "\x00group/"
	legacyIdemPrefix  = "\x00idem/"
)

// legacyName is the name r, written before version 14, has now; any
// other name is returned as it is.
func legacyName(r string) string {
	if r == "" || r[0] != 0 {
		return r
	}
	if rest, ok := strings.CutPrefix(r, legacyGroupPrefix); ok {
		if group, member, ok := strings.Cut(rest, "\x00"); ok {
			return GroupMemberResource(group, member) // member "": the group's own resource
		}
	}
	if key, ok := strings.CutPrefix(r, legacyIdemPrefix); ok {
		return IdemResource(key)
	}
	return r
}

// legacyNames applies legacyName to every name of rs, in place.
func legacyNames(rs []string) {
	for i, r := range rs {
		rs[i] = legacyName(r)
	}
}
