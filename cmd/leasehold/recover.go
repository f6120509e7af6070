package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

func newRecover() *cobra.Command {
	var dataDir string
	var yes, removed bool
	var o *output
	cmd := &cobra.Command{
		Use:   "recover --data-dir DIR [--yes] [--removed]",
		Short: "Repair a stopped single node whose log, snapshot or token floor is damaged, keeping what is intact",
		Long: "A node refuses to start on a damaged log, snapshot or token floor. recover runs the same\n" +
			"checks, shows what is damaged, what will be kept and exactly which entries are lost, asks\n" +
			"for confirmation (a typed \"yes\"; without a terminal it needs --yes), then moves damaged\n" +
			"snapshots aside, writes the log anew with the entries that follow on from the newest intact\n" +
			"snapshot as far as they are intact, and saves a token floor above every token that could\n" +
			"have been issued (worked out from the log and snapshots if the file is damaged or missing),\n" +
			"so no token is issued twice. Nothing is deleted: the damaged files go to DIR/damaged-TIME/.\n" +
			"A member of a cluster of several voters is recovered only once it is removed from the cluster\n" +
			"(`leasehold cluster remove ID`, then --removed here), and then started with --join; or empty\n" +
			"its data dir instead: the others send it everything. See docs/failure-semantics.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			if o.JSON() { // stdout is for the JSON result alone
				w = cmd.ErrOrStderr()
			}
			var refused error
			plan, err := cluster.Recover(dataDir, func(p *cluster.RecoveryPlan) bool {
				printPlan(w, dataDir, p)
				if len(p.Voters) > 1 && !removed {
					refused = fmt.Errorf("not recovered: %s is one of %d voters (%s). Recovered in place, its log shorter than "+
						"its votes promised, it could help elect a leader that lacks acknowledged entries. Remove it from the "+
						"cluster first (`leasehold cluster remove ID`), then run recover with --removed and start it with "+
						"--join URL; or empty %s and start it with --join URL", dataDir, len(p.Voters), strings.Join(p.Voters, ", "), dataDir)
					return false
				}
				refused = confirm(cmd, yes, `Type "yes" to recover: `, "not recovered")
				return refused == nil
			})
			switch {
			case err != nil:
				return err
			case plan.Damage == nil:
				return o.print(cmd.OutOrStdout(), cliout.Recovered{DataDir: dataDir}, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "%s passes every check the node makes at startup: nothing to recover\n", dataDir)
					return err
				})
			case refused != nil:
				return refused
			}
			res := cliout.Recovered{DataDir: dataDir, Damaged: true, Recovered: true, KeptTo: plan.LastGood, Lost: plan.Lost(),
				TokenFloor: plan.TokenFloor, Backup: plan.Backup}
			return o.print(cmd.OutOrStdout(), res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "recovered: the state is kept up to index %d, %s lost; token floor %d; damaged files are in %s\n",
					plan.LastGood, plural(plan.Lost(), "entry", "entries"), plan.TokenFloor, plan.Backup)
				return err
			})
		},
	}
	o = addOutput(cmd)
	cmd.Flags().StringVar(&dataDir, "data-dir", "./leasehold-data", "the stopped node's data directory")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&removed, "removed", false, "the node was removed from its cluster (leasehold cluster remove ID): recover it to rejoin with --join")
	return cmd
}

func printPlan(w io.Writer, dir string, p *cluster.RecoveryPlan) {
	fmt.Fprintf(w, "%s is damaged:\n", dir)
	for _, d := range p.Problems {
		fmt.Fprintf(w, "  - %s\n", d.Where())
	}
	fmt.Fprintf(w, "\nRecovery will:\n")
	for _, s := range p.Snapshots {
		fmt.Fprintf(w, "  - move the damaged snapshot %s aside\n", s)
	}
	switch {
	case !p.RebuildLog:
		fmt.Fprintf(w, "  - keep the log as it is (it is intact)\n")
	case p.FirstIndex == 0:
		fmt.Fprintf(w, "  - drop the whole log: none of it follows on from ")
		if p.Snapshot > 0 {
			fmt.Fprintf(w, "the snapshot at index %d, which is kept\n", p.Snapshot)
		} else {
			fmt.Fprintf(w, "index 1, and there is no intact snapshot\n")
		}
	default:
		fmt.Fprintf(w, "  - write the log anew with its intact entries %d to %d", p.FirstIndex, p.LastGood)
		if p.Snapshot > 0 {
			fmt.Fprintf(w, ", after the snapshot at index %d", p.Snapshot)
		}
		fmt.Fprintln(w)
	}
	switch {
	case p.Lost() > 0:
		fmt.Fprintf(w, "  - LOSE entries %d to %d (%s)", p.LostFrom, p.LostTo, plural(p.Lost(), "entry", "entries"))
		if p.MaybeMore {
			fmt.Fprintf(w, ", and any after them in the damaged bytes (the disk no longer says how many)")
		}
		fmt.Fprintf(w, ": changes acknowledged in them are gone\n")
	case p.MaybeMore:
		fmt.Fprintf(w, "  - LOSE any entries after index %d that were in the damaged bytes (the disk no longer says how many)\n", p.LastGood)
	default:
		fmt.Fprintf(w, "  - lose no entry: the state is intact up to index %d, the last the data dir shows\n", p.LastGood)
	}
	if p.Fresh {
		fmt.Fprintf(w, "  - start this node again as a new single-node cluster: nothing of its state is left\n"+
			"    (if you have a backup from `leasehold snapshot save`, restore that instead: docs/operations.md, \"Backup and restore\")\n")
	}
	if p.FloorRepaired {
		fmt.Fprintf(w, "  - save a token floor of %d: the token-floor file is missing or damaged, so the floor is set far\n"+
			"    above every token and index the log and snapshots show; tokens issued from now on start there\n", p.TokenFloor)
	} else {
		fmt.Fprintf(w, "  - keep the token floor at %d or above: every token issued from now on is at least %d, above\n"+
			"    every token this node ever issued, so none is issued twice\n", p.TokenFloor, p.TokenFloor)
	}
	fmt.Fprintf(w, "  - keep every file it drops or changes in %s\n", p.Backup)
	if len(p.Voters) > 1 {
		fmt.Fprintf(w, "This node is one of %d voters (%s): recover it only once it is removed from the cluster, then start it\n"+
			"with --join; or empty its data dir and start it with --join (the others send it everything).\n", len(p.Voters), strings.Join(p.Voters, ", "))
	}
	fmt.Fprintln(w)
}
