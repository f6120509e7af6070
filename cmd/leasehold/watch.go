package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

func newWatch(g *globals) *cobra.Command {
	var from uint64
	var renewals bool
	var out *output
	cmd := &cobra.Command{
		Use:   "watch PREFIX...",
		Short: "Print each change to resources and keys under PREFIXes, one per line, until interrupted",
		Long: "Prints every change (grants, releases, expiries, forced releases, waiters queued and\n" +
			"withdrawn, KV puts and deletes, election leader changes) to lease resources and KV keys\n" +
			"that start with a PREFIX (\"\" for everything), each with the log index that applied it.\n" +
			"When a node fails the watch moves to the next endpoint and resumes from the last index\n" +
			"it saw. --from-index N starts after index N; if no node keeps events that old, the\n" +
			"command fails naming the oldest index it can resume from.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			defer c.Close()
			var opts []client.WatchOption
			if cmd.Flags().Changed("from-index") {
				opts = append(opts, client.FromIndex(from))
			}
			if renewals {
				opts = append(opts, client.Renewals())
			}
			w := c.Watch(cmd.Context(), args, opts...)
			for e := range w.Events() {
				if err := printEvent(cmd.OutOrStdout(), e, out.JSON()); err != nil {
					return err
				}
			}
			if err := w.Err(); err != nil {
				return fmt.Errorf("watch stopped at index %d: %w", w.Index(), err)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.Uint64Var(&from, "from-index", 0, "start after this log index (default: now)")
	out = addOutput(cmd) // JSON: one object per line
	fl.BoolVar(&renewals, "renewals", false, "include lease renewals (left out by default)")
	return cmd
}

func printEvent(w io.Writer, e client.Event, asJSON bool) error {
	if asJSON {
		return writeJSONLine(w, cliout.FromEvent(e))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.Index, e.Kind)
	if e.Key != "" {
		fmt.Fprintf(&b, " key=%s version=%d", e.Key, e.Version)
	}
	if len(e.Resources) > 0 {
		fmt.Fprintf(&b, " resources=%s", strings.Join(e.Resources, ","))
	}
	if e.LeaseID != 0 {
		fmt.Fprintf(&b, " lease=%d token=%d", e.LeaseID, e.Token)
	}
	if e.Owner != "" {
		fmt.Fprintf(&b, " owner=%q", e.Owner)
	}
	if e.Operation != "" {
		fmt.Fprintf(&b, " operation=%q", e.Operation)
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", e.Reason)
	}
	if e.Kind == "put" || e.Kind == "leader_changed" {
		fmt.Fprintf(&b, " value=%q", e.Value)
	}
	_, err := fmt.Fprintln(w, b.String())
	return err
}
