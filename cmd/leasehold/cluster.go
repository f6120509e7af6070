package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// membershipWait is how long a membership change may take on the leader,
// on top of --timeout.
const membershipWait = 30 * time.Second

func newCluster(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show and change the cluster's membership",
	}
	var membersOut *output
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
			return membersOut.print(cmd.OutOrStdout(), cliout.FromMembers(r), func(w io.Writer) error {
				t := newTable(w, "NODE", "RAFT ADDRESS", "VOTER", "LEADER")
				for _, m := range r {
					t.row(m.ID, m.RaftAddr, m.Voter, m.Leader)
				}
				return t.flush()
			})
		},
	}
	membersOut = addOutput(members)

	var addOut, removeOut, transferOut *output
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
			return addOut.print(cmd.OutOrStdout(), cliout.MemberAdded{NodeID: args[0], RaftAddr: args[1]}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "added %s at %s\n", args[0], args[1])
				return err
			})
		},
	}
	addOut = addOutput(add)
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
			return removeOut.print(cmd.OutOrStdout(), cliout.MemberRemoved{NodeID: args[0]}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "removed %s\n", args[0])
				return err
			})
		},
	}
	removeOut = addOutput(remove)
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
			return transferOut.print(cmd.OutOrStdout(), cliout.LeaderTransferred{NodeID: id, Transferred: true}, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, "leadership transferred")
				return err
			})
		},
	}
	transferOut = addOutput(transfer)
	var statusOut *output
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
			return statusOut.print(cmd.OutOrStdout(), cliout.FromNodeStatus(r), func(w io.Writer) error {
				t := newTable(w, "NODE", "RAFT ADDRESS", "STATE", "TERM", "COMMIT", "APPLIED", "LAST INDEX", "LEADER", "LAST CONTACT", "NOTE")
				for _, n := range r {
					t.row(n.ID, n.RaftAddr, n.State, n.Term, n.CommitIndex, n.AppliedIndex, n.LastIndex, n.LeaderID,
						pdurIf(n.LastContact, n.Error == ""), n.Error)
				}
				return t.flush()
			})
		},
	}
	statusOut = addOutput(status)
	cmd.AddCommand(members, add, remove, transfer, status)
	return cmd
}
