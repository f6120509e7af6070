package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// membershipWait is how long a membership change may take on the leader,
// on top of --timeout.
const membershipWait = 30 * time.Second

func newCluster(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show and change the cluster's membership",
	}
	var asJSON bool
	members := &cobra.Command{
		Use:   "members",
		Short: "List the servers in the raft configuration",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel, err := g.session(cmd, membershipWait)
			if err != nil {
				return err
			}
			defer cancel()
			r, err := c.Members(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), membersWire(r))
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tRAFT ADDRESS\tVOTER\tLEADER")
			for _, m := range r {
				fmt.Fprintf(tw, "%s\t%s\t%v\t%v\n", m.ID, m.RaftAddr, m.Voter, m.Leader)
			}
			return tw.Flush()
		},
	}
	members.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	add := &cobra.Command{
		Use:   "add ID RAFTADDR",
		Short: "Add a node (started with --join or empty) as a voter",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, membershipWait)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.AddVoter(ctx, args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added %s at %s\n", args[0], args[1])
			return nil
		},
	}
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a node from the cluster",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, membershipWait)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.RemoveServer(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", args[0])
			return nil
		},
	}
	transfer := &cobra.Command{
		Use:   "transfer-leader [ID]",
		Short: "Hand leadership to ID, or to the most up-to-date follower",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, membershipWait)
			if err != nil {
				return err
			}
			defer cancel()
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			if err := c.TransferLeader(ctx, id); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "leadership transferred")
			return nil
		},
	}
	var statusJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Show each node's role, term, commit and applied index",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel, err := g.session(cmd, membershipWait)
			if err != nil {
				return err
			}
			defer cancel()
			r, err := c.ClusterStatus(ctx)
			if err != nil {
				return err
			}
			if statusJSON {
				return printJSON(cmd.OutOrStdout(), statusWire(r))
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tRAFT ADDRESS\tSTATE\tTERM\tCOMMIT\tAPPLIED\tLAST INDEX\tLEADER\tNOTE")
			for _, n := range r {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", n.ID, n.RaftAddr, n.State, n.Term,
					n.CommitIndex, n.AppliedIndex, n.LastIndex, n.LeaderID, n.Error)
			}
			return tw.Flush()
		},
	}
	status.Flags().BoolVar(&statusJSON, "json", false, "print JSON")
	cmd.AddCommand(members, add, remove, transfer, status)
	return cmd
}
