package leasehold

import "strings"

// ReservedPrefix starts the resource names of the leases leasehold makes
// for itself: a group member's session (GroupSessionResource) and an
// idempotency attempt ("@leasehold/idem/KEY"). They are printable,
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

// groupSessions starts a group member's session resource.
const groupSessions = ReservedPrefix + "group/"

var (
	groupEscaper   = strings.NewReplacer("%", "%25", "/", "%2F")
	groupUnescaper = strings.NewReplacer("%25", "%", "%2F", "/")
)

// GroupSessionResource is the resource of member's session leases in
// group: "@leasehold/group/GROUP/MEMBER", with a "/" or "%" in the
// group's name escaped (%2F, %25), so that the first "/" after it ends
// the name. With member "" it is the prefix of the group's sessions.
func GroupSessionResource(group, member string) string {
	return groupSessions + groupEscaper.Replace(group) + "/" + member
}

// GroupSessionOf is the group and member a session's resource names; ok
// is false for a name GroupSessionResource does not make.
func GroupSessionOf(resource string) (group, member string, ok bool) {
	rest, ok := strings.CutPrefix(resource, groupSessions)
	if !ok {
		return "", "", false
	}
	escaped, member, ok := strings.Cut(rest, "/")
	group = groupUnescaper.Replace(escaped)
	if !ok || member == "" || groupEscaper.Replace(group) != escaped {
		return "", "", false
	}
	return group, member, true
}
