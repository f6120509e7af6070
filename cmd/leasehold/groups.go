package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/client"
)

// leasehold groups: list, show, create, grow, delete (run is in
// groups_run.go).

func newGroups(g *globals) *cobra.Command {
	var asJSON bool
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
			w := cmd.OutOrStdout()
			if asJSON {
				out := make([]groupJSON, len(gs))
				for i, gi := range gs {
					out[i] = groupWire(gi)
				}
				return writeJSON(w, out)
			}
			if len(gs) == 0 {
				fmt.Fprintln(w, "no groups")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "GROUP\tPARTITIONS\tMEMBERS\tREVOKING\tUNOWNED\tREBALANCES")
			for _, gi := range gs {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", gi.Name, gi.Partitions, gi.Members, gi.PendingRevocations, gi.Unowned, gi.Rebalances)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only groups whose name starts with this")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	cmd.AddCommand(newGroupsShow(g), newGroupsCreate(g), newGroupsGrow(g), newGroupsDelete(g), newGroupsRun(g))
	return cmd
}

func newGroupsShow(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show GROUP [--json]",
		Short: "Show a group: its members, and every partition with owner, epoch and since when",
		Args:  cobra.ExactArgs(1),
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
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), groupDetailWire(d))
			}
			return printGroup(cmd.OutOrStdout(), d)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func printGroup(w io.Writer, d client.GroupDetail) error {
	revoke := "the member TTL"
	if d.RevokeTimeout > 0 {
		revoke = d.RevokeTimeout.String()
	}
	fmt.Fprintf(w, "group %s: %d partitions, %d members, %d revoking, %d unowned, %d rebalances; revocations lapse after %s\n",
		d.Name, d.Partitions, d.Members, d.PendingRevocations, d.Unowned, d.Rebalances, revoke)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(d.MemberList) > 0 {
		fmt.Fprintln(tw, "\nMEMBER\tLEASE\tPARTITIONS\tREVOKING\tSINCE\tEXPIRES IN")
		for _, m := range d.MemberList {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", m.Member, m.LeaseID, len(m.Partitions), orDash(joinInts(m.Revoking)),
				stamp(m.Since, "2006-01-02 15:04:05"), pdur(m.ExpiresIn))
		}
	}
	fmt.Fprintln(tw, "\nPARTITION\tOWNER\tEPOCH\tSINCE\tREVOKING TO")
	for _, p := range d.PartitionList {
		next := "-"
		if p.Revoking {
			next = orDash(p.NextOwner)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", p.Partition, orDash(p.Owner), p.Epoch, stamp(p.Since, "2006-01-02 15:04:05"), next)
	}
	return tw.Flush()
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
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create GROUP --partitions N [--revoke-timeout D]",
		Short: "Create a partition group with N partitions (numbered from 0)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("partitions") {
				return errors.New("--partitions is required: how many partitions the group has (1 to 65536)")
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
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), groupWire(gi))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created group %s with %d partitions\n", gi.Name, gi.Partitions)
			return nil
		},
	}
	cmd.Flags().IntVar(&partitions, "partitions", 0, "number of partitions, 1 to 65536 (required)")
	cmd.Flags().DurationVar(&revokeTimeout, "revoke-timeout", 0, "how long a member may take to give up a revoked partition before its session is ended (default: the member's TTL)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the group as a JSON object")
	return cmd
}

func newGroupsGrow(g *globals) *cobra.Command {
	var partitions int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "grow GROUP --partitions N",
		Short: "Raise a group's partition count to N (groups never shrink)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("partitions") {
				return errors.New("--partitions is required: the new partition count")
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
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), groupWire(gi))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "group %s has %d partitions\n", gi.Name, gi.Partitions)
			return nil
		},
	}
	cmd.Flags().IntVar(&partitions, "partitions", 0, "the new partition count (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the group as a JSON object")
	return cmd
}

func newGroupsDelete(g *globals) *cobra.Command {
	var reason string
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete GROUP --reason TEXT [--yes]",
		Short: "Delete a group and end every member's session (admin; recorded in the audit log)",
		Long: `Deletes GROUP: every member's session ends at once, so their partitions are no
longer theirs, and their epochs stay in force at the fenced resources. The actor,
the reason and the time go to the audit log. Asks for confirmation unless --yes;
without a terminal it needs --yes. Needs the admin role.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return errors.New("--reason is required: why the group is deleted (kept in the audit log)")
			}
			if err := confirm(cmd, yes, fmt.Sprintf("Delete group %s and end its members' sessions? Type yes: ", args[0]), "not deleted"); err != nil {
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
			fmt.Fprintf(cmd.OutOrStdout(), "deleted group %s\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required; kept in the audit log)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

// writeJSON prints v, a plain struct with snake_case JSON tags, on one
// line: the one helper the groups commands print JSON with.
func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// rfc3339 is t as the JSON output shows times: RFC 3339 UTC with
// fractional seconds, "" when unset.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// durJSON is d as the JSON output shows durations, "" when unset.
func durJSON(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

type groupJSON struct {
	Group              string `json:"group"`
	Partitions         int    `json:"partitions"`
	Members            int    `json:"members"`
	PendingRevocations int    `json:"pending_revocations"`
	Unowned            int    `json:"unowned"`
	Rebalances         uint64 `json:"rebalances"`
	RevokeTimeout      string `json:"revoke_timeout,omitempty"`
	CreatedAt          string `json:"created_at,omitempty"`
}

func groupWire(g client.GroupInfo) groupJSON {
	return groupJSON{Group: g.Name, Partitions: g.Partitions, Members: g.Members, PendingRevocations: g.PendingRevocations,
		Unowned: g.Unowned, Rebalances: g.Rebalances, RevokeTimeout: durJSON(g.RevokeTimeout), CreatedAt: rfc3339(g.CreatedAt)}
}

type groupMemberJSON struct {
	Member     string            `json:"member"`
	LeaseID    uint64            `json:"lease_id"`
	Since      string            `json:"since,omitempty"`
	ExpiresIn  string            `json:"expires_in,omitempty"`
	Partitions []int             `json:"partitions"`
	Revoking   []int             `json:"revoking"`
	Metadata   map[string]string `json:"metadata,omitempty"`
}

type groupPartitionJSON struct {
	Partition     int    `json:"partition"`
	Owner         string `json:"owner,omitempty"`
	LeaseID       uint64 `json:"lease_id,omitempty"`
	Epoch         uint64 `json:"epoch,omitempty"`
	Since         string `json:"since,omitempty"`
	Revoking      bool   `json:"revoking"`
	NextOwner     string `json:"next_owner,omitempty"`
	RevokingSince string `json:"revoking_since,omitempty"`
}

type groupDetailJSON struct {
	groupJSON
	MemberList    []groupMemberJSON    `json:"member_list"`
	PartitionList []groupPartitionJSON `json:"partition_list"`
}

func groupDetailWire(d client.GroupDetail) groupDetailJSON {
	out := groupDetailJSON{groupJSON: groupWire(d.GroupInfo), MemberList: []groupMemberJSON{}, PartitionList: []groupPartitionJSON{}}
	for _, m := range d.MemberList {
		out.MemberList = append(out.MemberList, groupMemberJSON{Member: m.Member, LeaseID: m.LeaseID, Since: rfc3339(m.Since),
			ExpiresIn: durJSON(m.ExpiresIn), Partitions: nonNil(m.Partitions), Revoking: nonNil(m.Revoking), Metadata: m.Metadata})
	}
	for _, p := range d.PartitionList {
		out.PartitionList = append(out.PartitionList, groupPartitionJSON{Partition: p.Partition, Owner: p.Owner, LeaseID: p.LeaseID,
			Epoch: p.Epoch, Since: rfc3339(p.Since), Revoking: p.Revoking, NextOwner: p.NextOwner, RevokingSince: rfc3339(p.RevokingSince)})
	}
	return out
}

func nonNil(ns []int) []int {
	if ns == nil {
		return []int{}
	}
	return ns
}
