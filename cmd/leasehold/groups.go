package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// leasehold groups: list, show, create, grow, delete (run is in
// groups_run.go).

func newGroups(g *globals) *cobra.Command {
	var o *output
	var prefix string
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "Partition groups: list them, show one, create, grow, delete, run a command per owned partition",
		Long: `Without a subcommand, lists the partition groups by name: partitions, members,
pending revocations, partitions without an owner, and rebalances so far.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			gs, err := c.Groups(ctx, prefix)
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.FromGroups(gs), func(w io.Writer) error {
				if len(gs) == 0 {
					fmt.Fprintln(w, "no groups")
					return nil
				}
				headers := []string{"GROUP", "PARTITIONS", "MEMBERS", "REVOKING", "UNOWNED", "REBALANCES"}
				if o.Wide() {
					headers = append(headers, "REVOKE TIMEOUT", "CREATED")
				}
				t := newTable(w, headers...)
				for _, gi := range gs {
					cells := []any{gi.Name, gi.Partitions, gi.Members, gi.PendingRevocations, gi.Unowned, gi.Rebalances}
					if o.Wide() {
						cells = append(cells, pdur(gi.RevokeTimeout), stamp(gi.CreatedAt, "2006-01-02 15:04:05"))
					}
					t.row(cells...)
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only groups whose name starts with this")
	o = addOutput(cmd)
	cmd.AddCommand(newGroupsShow(g), newGroupsCreate(g), newGroupsGrow(g), newGroupsDelete(g), newGroupsRun(g))
	return cmd
}

func newGroupsShow(g *globals) *cobra.Command {
	var o *output
	cmd := &cobra.Command{
		Use:               "show GROUP [--json]",
		Short:             "Show a group: its members, and every partition with owner, epoch and since when",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, groupNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			d, err := c.Group(ctx, args[0])
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.FromGroupDetail(d), func(w io.Writer) error { return printGroup(w, d) })
		},
	}
	o = addOutput(cmd)
	return cmd
}

func printGroup(w io.Writer, d client.GroupDetail) error {
	revoke := "the member TTL"
	if d.RevokeTimeout > 0 {
		revoke = d.RevokeTimeout.String()
	}
	fmt.Fprintf(w, "group %s: %s, %s, %d revoking, %d unowned, %s; revocations lapse after %s\n",
		d.Name, plural(d.Partitions, "partition", ""), plural(d.Members, "member", ""), d.PendingRevocations, d.Unowned,
		plural(d.Rebalances, "rebalance", ""), revoke)
	if len(d.MemberList) > 0 {
		fmt.Fprintln(w)
		t := newTable(w, "MEMBER", "LEASE", "PARTITIONS", "REVOKING", "SINCE", "EXPIRES IN")
		for _, m := range d.MemberList {
			t.row(m.Member, m.LeaseID, len(m.Partitions), joinInts(m.Revoking), stamp(m.Since, "2006-01-02 15:04:05"), pdur(m.ExpiresIn))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	t := newTable(w, "PARTITION", "OWNER", "EPOCH", "SINCE", "REVOKING TO")
	for _, p := range d.PartitionList {
		next := ""
		if p.Revoking {
			next = p.NextOwner
		}
		t.row(p.Partition, p.Owner, p.Epoch, stamp(p.Since, "2006-01-02 15:04:05"), next)
	}
	return t.flush()
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func newGroupsCreate(g *globals) *cobra.Command {
	var partitions int
	var revokeTimeout time.Duration
	var o *output
	cmd := &cobra.Command{
		Use:   "create GROUP --partitions N [--revoke-timeout D]",
		Short: "Create a partition group with N partitions (numbered from 0)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("partitions") {
				return usagef("--partitions is required: how many partitions the group has (1 to 65536)")
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			var opts []client.GroupOption
			if revokeTimeout > 0 {
				opts = append(opts, client.RevokeTimeout(revokeTimeout))
			}
			gi, err := c.CreateGroup(ctx, args[0], partitions, opts...)
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.FromGroup(gi), func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "created group %s with %s\n", gi.Name, plural(gi.Partitions, "partition", ""))
				return err
			})
		},
	}
	cmd.Flags().IntVar(&partitions, "partitions", 0, "number of partitions, 1 to 65536 (required)")
	cmd.Flags().DurationVar(&revokeTimeout, "revoke-timeout", 0, "how long a member may take to give up a revoked partition before its session is ended (default: the member's TTL)")
	o = addOutput(cmd)
	return cmd
}

func newGroupsGrow(g *globals) *cobra.Command {
	var partitions int
	var o *output
	cmd := &cobra.Command{
		Use:               "grow GROUP --partitions N",
		Short:             "Raise a group's partition count to N (groups never shrink)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, groupNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("partitions") {
				return usagef("--partitions is required: the new partition count")
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			gi, err := c.GrowGroup(ctx, args[0], partitions)
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.FromGroup(gi), func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "group %s has %s\n", gi.Name, plural(gi.Partitions, "partition", ""))
				return err
			})
		},
	}
	cmd.Flags().IntVar(&partitions, "partitions", 0, "the new partition count (required)")
	o = addOutput(cmd)
	return cmd
}

func newGroupsDelete(g *globals) *cobra.Command {
	var reason string
	var yes bool
	var o *output
	cmd := &cobra.Command{
		Use:   "delete GROUP --reason TEXT [--yes]",
		Short: "Delete a group and end every member's session (admin; recorded in the audit log)",
		Long: `Deletes GROUP: every member's session ends at once, so their partitions are no
longer theirs, and their epochs stay in force at the fenced resources. The actor,
the reason and the time go to the audit log. Asks for confirmation unless --yes;
without a terminal it needs --yes. Needs the admin role.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, groupNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := confirmAudited(cmd, reason, "why the group is deleted", yes,
				fmt.Sprintf("Delete group %s and end its members' sessions? Type yes: ", args[0]), "not deleted"); err != nil {
				return err
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.DeleteGroup(ctx, args[0], reason); err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.GroupDeleted{Group: args[0], Deleted: true}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "deleted group %s\n", args[0])
				return err
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required; kept in the audit log)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	o = addOutput(cmd)
	return cmd
}
