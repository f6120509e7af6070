package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

// A token's prefixes bind every role. A token limited to prefixes may
// call a procedure only if every name its request touches (the table's
// Scope) lies under one of them; a list or a watch must ask for a prefix
// that does, so what it answers does too. A lease it may see is shown
// without the resources outside them (visible), the audit log without
// their records, and what acts on every tenant at once (membership, a
// snapshot) is refused.

// limited says p is held to its prefixes.
func (p Principal) limited() bool {
	return len(p.Prefixes) > 0 && !slices.Contains(p.Prefixes, "")
}

// allows reports whether p may touch a name (or list a prefix) s.
func (p Principal) allows(s string) bool {
	if !p.limited() {
		return true
	}
	for _, pre := range p.Prefixes {
		if strings.HasPrefix(s, pre) {
			return true
		}
	}
	return false
}

// mayCall checks p's role against what row needs, and refuses a limited
// token what acts on every tenant.
func (p Principal) mayCall(row *api.Procedure) error {
	if p.Role < row.Role {
		return leasehold.Errorf(leasehold.CodePermission, "token %q has role %s; %s needs %s", p.Name, p.Role, row.Name, row.Role)
	}
	if p.limited() && row.Scope.Kind == api.ScopeCluster {
		return leasehold.Errorf(leasehold.CodePermission,
			"token %q is limited to the prefixes %q; %s acts on every tenant's data: use a token without prefixes",
			p.Name, p.Prefixes, row.Name)
	}
	return nil
}

// authorize is the check of one call of procedure with request msg: the
// role, and the names the request touches. A procedure without a row is
// served to no one.
func (p Principal) authorize(procedure string, msg any) error {
	row := api.Lookup(procedure)
	if row == nil {
		return leasehold.Errorf(leasehold.CodePermission, "%s is not a procedure this node serves", procedure)
	}
	if err := p.mayCall(row); err != nil {
		return err
	}
	if !p.limited() {
		return nil
	}
	for _, n := range row.Scope.Names(msg) {
		if p.allows(n) {
			continue
		}
		hint := ""
		if strings.Contains(row.Scope.Of, "prefix") {
			hint = ": a list or watch must ask for one of them, or a prefix inside one"
		}
		return leasehold.Errorf(leasehold.CodePermission, "token %q is limited to the prefixes %q; %q is not under them%s",
			p.Name, p.Prefixes, n, hint)
	}
	return nil
}

// principalOf is the caller of ctx's request (the guard put it there;
// anonymous, everything, without one).
func principalOf(ctx context.Context) Principal {
	if p, ok := ctx.Value(principalKey{}).(Principal); ok {
		return p
	}
	return anonymous
}

// visible is what of names (a lease's or a waiter's resources) the caller
// of ctx may see.
func visible(ctx context.Context, names []string) []string {
	p := principalOf(ctx)
	if !p.limited() {
		return names
	}
	var out []string
	for _, n := range names {
		if p.allows(n) {
			out = append(out, n)
		}
	}
	return out
}

// visibleLease is l as the caller of ctx may see it.
func visibleLease(ctx context.Context, l *pb.Lease) *pb.Lease {
	if l != nil {
		l.Resources = visible(ctx, l.Resources)
	}
	return l
}

// checkPrefixes refuses an auth-file entry whose prefixes are not names.
func checkPrefixes(t TokenEntry) error {
	for i, pre := range t.Prefixes {
		if err := leasehold.ValidateName(fmt.Sprintf("prefixes[%d]", i), pre, leasehold.MaxResourceLen, false); err != nil {
			return fmt.Errorf("auth file: token %q: %v", t.Name, err)
		}
	}
	return nil
}
