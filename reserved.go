package leasehold

import "strings"

// ReservedPrefix starts the resource names of the leases leasehold makes
// for itself: a group member's session ("@leasehold/group/GROUP/MEMBER")
// and an idempotency attempt ("@leasehold/idem/KEY"). They are printable,
// so an operator can name them to status, locks show, force-release and
// the dashboard, but no caller may take one: a resource, key or fence
// under the prefix is refused (Reserved).
//
// "@leasehold/" rather than a short "lh:": it says whose names these are
// to someone who has never read this, and nobody names their own
// resources so by chance.
const ReservedPrefix = "@leasehold/"

// Reserved refuses a name a caller gives for something it takes or
// writes (a resource, a key) under ReservedPrefix.
func Reserved(field, name string) error {
	if strings.HasPrefix(name, ReservedPrefix) {
		return Errorf(CodeInvalid, "%s %q is under the prefix %q, which leasehold keeps for its own leases (group sessions, idempotency attempts); choose another name",
			field, name, ReservedPrefix)
	}
	return nil
}
