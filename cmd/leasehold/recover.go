package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/cluster"
)

func newRecover() *cobra.Command {
	var dataDir string
	var yes bool
	cmd := &cobra.Command{
		Use:   "recover --data-dir DIR [--yes]",
		Short: "Repair a stopped single node whose log or snapshot is damaged, keeping what is intact",
		Long: "A node refuses to start on a damaged log or snapshot. recover shows what is damaged and\n" +
			"what will be kept, asks for confirmation (a typed \"yes\"; without a terminal it needs\n" +
			"--yes), then moves damaged snapshots aside and cuts the log after its last intact entry.\n" +
			"Acknowledged changes after that entry are lost; fencing tokens are never issued twice\n" +
			"(the token floor is kept). Nothing is deleted: the damaged files go to DIR/damaged-TIME/.\n" +
			"In a cluster, do not recover a node: wipe its data dir and let it rejoin (the others\n" +
			"send it everything). See README, \"Failure semantics\".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			var refused error
			plan, err := cluster.Recover(dataDir, func(p *cluster.RecoveryPlan) bool {
				printPlan(w, dataDir, p)
				refused = confirm(cmd, yes, `Type "yes" to recover: `, "not recovered")
				return refused == nil
			})
			switch {
			case err != nil:
				return err
			case plan.Damage == nil:
				fmt.Fprintf(w, "%s is intact: nothing to recover\n", dataDir)
				return nil
			case refused != nil:
				return refused
			}
			fmt.Fprintf(w, "recovered: the log is kept up to index %d; damaged files are in %s\n", plan.LastGood, plan.Backup)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "./leasehold-data", "the stopped node's data directory")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

func printPlan(w io.Writer, dir string, p *cluster.RecoveryPlan) {
	fmt.Fprintf(w, "%s is damaged:\n  %s\n\nRecovery will:\n", dir, p.Damage.What())
	for _, s := range p.Snapshots {
		fmt.Fprintf(w, "  - move the damaged snapshot %s aside\n", s)
	}
	switch {
	case len(p.Files) == 0:
		fmt.Fprintf(w, "  - keep the whole log (it is intact)\n")
	case p.LastGood == 0:
		fmt.Fprintf(w, "  - drop the whole log: none of it can be applied")
		if p.Snapshot > 0 {
			fmt.Fprintf(w, " after the snapshot at index %d, which is kept", p.Snapshot)
		}
		fmt.Fprintln(w)
	default:
		fmt.Fprintf(w, "  - keep the log from index %d to %d\n", p.FirstIndex, p.LastGood)
	}
	if len(p.Files) > 0 {
		fmt.Fprintf(w, "  - LOSE every entry from index %d on: changes acknowledged after it are gone\n", p.LostFrom)
		fmt.Fprintf(w, "  - move (or copy, for the one that is cut) these log files to %s:\n", p.Backup)
		for _, f := range p.Files {
			fmt.Fprintf(w, "      %s\n", f)
		}
	}
	if p.Fresh {
		fmt.Fprintf(w, "  - start this node again as a new single-node cluster: nothing of its state is left\n")
	}
	if p.FloorGuessed {
		fmt.Fprintf(w, "  - save a token floor of %d: this data dir has none (written by an older version), so it is\n"+
			"    set far above every index the log shows; tokens issued from now on start there\n", p.TokenFloor)
	} else {
		fmt.Fprintf(w, "  - keep the token floor: every token issued from now on is at least %d, above every token\n"+
			"    this node ever issued, so none is issued twice\n", p.TokenFloor)
	}
	fmt.Fprintf(w, "In a cluster, stop here: wipe this node's data dir and let it rejoin instead.\n\n")
}
