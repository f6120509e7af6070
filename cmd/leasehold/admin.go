package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// Operators' commands: locks, locks show, force-release and audit.

const (
	markOverdue = "renewal-overdue"
	markStale   = "progress-stale"
)

var markHelp = map[string]string{
	markOverdue: "no renewal for over half the TTL: the holder is stuck, cut off or gone, and the lease is about to expire",
	markStale:   "the last progress note is older than 3 TTLs: the holder renews without visible progress",
}

func marks(l client.LockInfo) []string {
	var m []string
	if l.RenewalOverdue {
		m = append(m, markOverdue)
	}
	if l.ProgressStale {
		m = append(m, markStale)
	}
	return m
}

// stamp shows a leader's wall-clock time for display.
func stamp(t time.Time, layout string) string {
	if t.IsZero() {
		return "never"
	}
	return t.Local().Format(layout)
}

// clip shortens s to n runes for a table cell.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// pdur shows a duration, or "-" when it is unset (0).
func pdur(d time.Duration) string { return pdurIf(d, d != 0) }

// pdurIf shows a duration that may be 0, or "-" when it is unknown.
func pdurIf(d time.Duration, known bool) string {
	if !known {
		return "-"
	}
	return cliout.Dur(d)
}

// expiresIn shows a holder's countdown, or "-" if the node does not know it.
func expiresIn(h *client.LeaseInfo) string { return pdurIf(h.ExpiresIn, h.ExpiresKnown) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newLocks(g *globals) *cobra.Command {
	var out *output
	var prefix string
	cmd := &cobra.Command{
		Use:   "locks",
		Short: "Show who holds which resource, for how long, how it renews and progresses, and who waits",
		Long: "Lists every held resource with its lease, owner, operation, fencing token, age, countdown,\n" +
			"renewals, last progress note and waiters, and marks the unhealthy ones:\n" +
			"  " + markOverdue + ": " + markHelp[markOverdue] + "\n" +
			"  " + markStale + ": " + markHelp[markStale] + "\n" +
			"Needs the operator role.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			locks, err := c.Locks(ctx, client.LocksQuery{Prefix: prefix})
			if err != nil {
				return err
			}
			sort.SliceStable(locks, func(i, j int) bool { return locks[i].Resource < locks[j].Resource })
			w := cmd.OutOrStdout()
			if out.JSON() {
				return writeJSON(w, cliout.FromLocks(locks))
			}
			if len(locks) == 0 {
				fmt.Fprintln(w, "no resource is held")
				return nil
			}
			headers := []string{"RESOURCE", "LEASE", "TOKEN", "OWNER", "OPERATION", "HELD", "EXPIRES IN", "RENEWALS", "WAITERS", "MARKS"}
			if out.Wide() {
				headers = []string{"RESOURCE", "LEASE", "TOKEN", "OWNER", "OPERATION", "HELD", "EXPIRES IN", "TTL", "RENEWALS",
					"LAST RENEWAL", "PROGRESS", "WAITERS", "OLDEST WAIT", "MARKS"}
			}
			t := newTable(w, headers...)
			seen := map[string]bool{}
			for _, l := range locks {
				m := marks(l)
				for _, k := range m {
					seen[k] = true
				}
				h := l.Holder
				if h == nil {
					h = &client.LeaseInfo{}
				}
				if out.Wide() {
					t.row(l.Resource, h.ID, h.Token, h.Owner, h.Operation, pdurIf(l.HeldFor, l.Holder != nil), expiresIn(h),
						pdur(h.TTL), h.RenewCount, stamp(h.RenewedAt, "15:04:05"), clip(h.Progress, 32), l.Waiters,
						pdurIf(l.OldestWait, l.Waiters > 0), strings.Join(m, ","))
				} else {
					t.row(l.Resource, h.ID, h.Token, clip(h.Owner, 24), clip(h.Operation, 24), pdurIf(l.HeldFor, l.Holder != nil),
						expiresIn(h), h.RenewCount, l.Waiters, strings.Join(m, ","))
				}
			}
			if err := t.flush(); err != nil {
				return err
			}
			for _, k := range []string{markOverdue, markStale} {
				if seen[k] {
					fmt.Fprintf(w, "%s: %s\n", k, markHelp[k])
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only resources starting with this")
	out = addOutput(cmd)
	cmd.AddCommand(newLocksShow(g))
	return cmd
}

func newLocksShow(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:               "show RESOURCE",
		Short:             "Show one resource in full: its holder, health marks and every waiter",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, resourceNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			l, err := lockOf(ctx, c, args[0])
			if err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), cliout.FromLock(l), func(w io.Writer) error {
				printLock(w, l)
				return nil
			})
		},
	}
	out = addOutput(cmd)
	return cmd
}

// lockOf asks for one resource, held or free, with its waiters.
func lockOf(ctx context.Context, c *client.Client, resource string) (client.LockInfo, error) {
	ls, err := c.Locks(ctx, client.LocksQuery{Resource: resource})
	if err != nil {
		return client.LockInfo{}, err
	}
	if len(ls) != 1 {
		return client.LockInfo{}, fmt.Errorf("the server answered with %d entries for one resource", len(ls))
	}
	return ls[0], nil
}

// printLock prints one resource in full.
func printLock(w io.Writer, l client.LockInfo) {
	const full = "2006-01-02 15:04:05 MST"
	if h := l.Holder; h == nil {
		fmt.Fprintf(w, "%s: free\n", l.Resource)
	} else {
		fmt.Fprintf(w, "%s: held by lease %d\n", l.Resource, h.ID)
		fmt.Fprintf(w, "  owner:        %s\n", orDash(h.Owner))
		fmt.Fprintf(w, "  operation:    %s\n", orDash(h.Operation))
		fmt.Fprintf(w, "  token:        %d\n", h.Token)
		if len(h.Resources) > 1 {
			fmt.Fprintf(w, "  lease holds:  %s\n", strings.Join(h.Resources, ", "))
		}
		fmt.Fprintf(w, "  acquired at:  %s (held for %s)\n", stamp(h.AcquiredAt, full), pdurIf(l.HeldFor, true))
		fmt.Fprintf(w, "  expires in:   %s (ttl %s", expiresIn(h), pdur(h.TTL))
		if h.MaxHold != 0 {
			fmt.Fprintf(w, ", max hold %s", pdur(h.MaxHold))
		}
		fmt.Fprintln(w, ")")
		fmt.Fprintf(w, "  renewals:     %d, last at %s\n", h.RenewCount, stamp(h.RenewedAt, full))
		if h.Progress != "" {
			fmt.Fprintf(w, "  progress:     %s (reported at %s)\n", h.Progress, stamp(h.ProgressAt, full))
		}
		if len(h.Metadata) > 0 {
			fmt.Fprintf(w, "  metadata:     %s\n", metadataText(h.Metadata))
		}
		for _, m := range marks(l) {
			fmt.Fprintf(w, "  MARK %s: %s\n", m, markHelp[m])
		}
	}
	if l.LockDelay != 0 {
		fmt.Fprintf(w, "  in lock-delay (%s) after an expiry or a forced release\n", pdur(l.LockDelay))
	}
	if l.Waiters == 0 {
		fmt.Fprintln(w, "  waiters:      none")
		return
	}
	fmt.Fprintf(w, "  waiters:      %d, the first queued for %s\n", l.Waiters, pdurIf(l.OldestWait, l.Waiters > 0))
	for i, wt := range l.WaiterList {
		fmt.Fprintf(w, "  %3d. owner %s, operation %s, wants %s, queued for %s (waits up to %s)\n",
			i+1, orDash(wt.Owner), orDash(wt.Operation), strings.Join(wt.Resources, ", "), pdurIf(wt.Waiting, true), pdur(wt.Wait))
	}
}

// metadataText shows metadata as k="v" pairs in key order.
func metadataText(md map[string]string) string {
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, md[k])
	}
	return strings.Join(parts, " ")
}

// stdinIsTerminal reports whether r is an interactive terminal, where a
// person can answer a confirmation. /dev/null is a character device but
// no terminal: term.IsTerminal asks the tty driver.
var stdinIsTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newForceRelease(g *globals) *cobra.Command {
	var leaseID uint64
	var reason string
	var yes bool
	var out *output
	cmd := &cobra.Command{
		Use:   "force-release RESOURCE --lease ID --reason TEXT [--yes]",
		Short: "End the lease holding RESOURCE without its secret, and record who did it and why",
		Long: "Ends the lease holding RESOURCE if it is still the lease given with --lease (see\n" +
			"leasehold locks show RESOURCE), so a newer holder is never released by mistake. The\n" +
			"holder is not told and may still be writing: only resources that check fencing tokens\n" +
			"are safe from it. The actor (your identity), the reason, the time, the lease and its\n" +
			"token go to the replicated audit log (leasehold audit). Asks for confirmation unless\n" +
			"--yes; without a terminal it needs --yes. Needs the admin role.\n" +
			"What can go wrong, and when to force: " + runbookForceRelease + ".",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, resourceNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			resource := args[0]
			if leaseID == 0 {
				return usagef("--lease is required: the id of the lease holding the resource (leasehold locks show %s)", resource)
			}
			if err := requireReason(reason, "why the release is forced"); err != nil {
				return err
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			l, err := lockOf(ctx, c, resource)
			if err != nil {
				return err
			}
			h := l.Holder
			if h == nil {
				return goneError{fmt.Errorf("%s is not held: nothing to release", resource)}
			}
			if h.ID != leaseID {
				return fmt.Errorf("%s is held by lease %d (owner %s, operation %s), not lease %d: look again with leasehold locks show %s",
					resource, h.ID, orDash(h.Owner), orDash(h.Operation), leaseID, resource)
			}
			w := cmd.OutOrStdout()
			if out.JSON() { // stdout is for the JSON result alone
				w = cmd.ErrOrStderr()
			}
			fmt.Fprintf(w, "About to force the release of %s:\n", resource)
			printLock(w, l)
			fmt.Fprintf(w, "\nRisk: the holder is not told and may still be writing. Only resources that check the\n"+
				"fencing token are safe from it (they refuse token %d once a newer holder writes).\n"+
				"Read before you force: %s\n", h.Token, runbookForceRelease)
			if len(h.Resources) > 1 {
				fmt.Fprintf(w, "The whole lease ends: it also frees %s.\n", strings.Join(h.Resources, ", "))
			}
			fmt.Fprintf(w, "Reason for the audit log: %s\n", reason)
			if err := confirm(cmd, yes, `Type "yes" to force the release: `, "not released"); err != nil {
				return err
			}
			ended, err := c.ForceRelease(ctx, resource, leaseID, reason)
			if err != nil {
				return err
			}
			if ended == nil { // an older server may leave the lease out
				ended = &client.LeaseInfo{}
			}
			res := cliout.ForceReleased{Resource: resource, LeaseID: ended.ID, Token: ended.Token, Owner: ended.Owner}
			return out.print(cmd.OutOrStdout(), res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "released lease %d (token %d, owner %s); recorded in the audit log\n",
					ended.ID, ended.Token, orDash(ended.Owner))
				return err
			})
		},
	}
	out = addOutput(cmd)
	cmd.Flags().Uint64Var(&leaseID, "lease", 0, "the id of the lease expected to hold RESOURCE (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the audit log: 1 to 512 bytes (required)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

func newAudit(g *globals) *cobra.Command {
	var out *output
	var since time.Duration
	var limit int
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log of operators' actions (forced releases, queue purges and deletes, group deletes), oldest first",
		Long: "Shows who forced a release (force-release), purged or deleted a queue (queue purge, queue delete)\n" +
			"or deleted a group (groups delete), when and why: the ACTION column says which, RESOURCE names\n" +
			"the resource, queue or group. Needs the operator role.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if since < 0 {
				return usagef("--since %v: must not be negative", since)
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			recs, truncated, err := c.Audit(ctx, since, limit)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if out.JSON() {
				return writeJSON(w, cliout.FromAudit(recs, truncated))
			}
			if truncated {
				fmt.Fprintf(cmd.ErrOrStderr(), "showing the newest %s; older ones were left out (raise --limit or narrow --since)\n", plural(len(recs), "record", ""))
			}
			if len(recs) == 0 {
				fmt.Fprintln(w, "no audit records")
				return nil
			}
			t := newTable(w, "TIME", "ACTOR", "ACTION", "RESOURCE", "LEASE", "TOKEN", "OWNER", "OPERATION", "REASON")
			for _, a := range recs {
				t.row(stamp(a.Time, "2006-01-02 15:04:05 MST"), a.Actor, a.Action, a.Resource, a.LeaseID, a.Token,
					a.Owner, a.Operation, a.Reason)
			}
			return t.flush()
		},
	}
	durationVar(cmd.Flags(), &since, "since", 0, "only records from this long ago until now (0: every record kept)")
	cmd.Flags().IntVar(&limit, "limit", 100, "show at most the newest this many records (1 to 1000)")
	out = addOutput(cmd)
	return cmd
}
