package main

import (
	"fmt"
	"io"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
	"github.com/spf13/cobra"
)

// Idempotency keys: idem show and idem list.

func newIdem(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "idem", Short: "Inspect idempotency keys"}
	cmd.AddCommand(newIdemShow(g), newIdemList(g))
	return cmd
}

func newIdemShow(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:               "show KEY",
		Short:             "Show one idempotency key: its state, attempt token, owner, age and result size",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, idemNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			r, err := c.IdemGet(ctx, args[0])
			if err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), cliout.FromIdem(r), func(w io.Writer) error {
				printIdem(w, r)
				return nil
			})
		},
	}
	out = addOutput(cmd)
	return cmd
}

func newIdemList(g *globals) *cobra.Command {
	var out *output
	var prefix string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List idempotency keys in use (in progress or completed), by key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			var all []client.IdemInfo
			after := ""
			for {
				page, err := c.IdemList(ctx, prefix, after, 1000)
				if err != nil {
					return err
				}
				all = append(all, page...)
				if len(page) < 1000 {
					break
				}
				after = page[len(page)-1].Key
			}
			recs := cliout.IdemRecords{Records: []cliout.IdemRecord{}}
			for _, r := range all {
				recs.Records = append(recs.Records, cliout.FromIdem(r))
			}
			return out.print(cmd.OutOrStdout(), recs, func(w io.Writer) error {
				t := newTable(w, "KEY", "STATE", "TOKEN", "OWNER", "STARTED", "RESULT")
				for _, r := range all {
					t.row(clip(r.Key, 48), r.State, r.Token, clip(r.Owner, 24), stamp(r.StartedAt, "2006-01-02 15:04:05"), resultCell(r))
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only keys starting with this")
	out = addOutput(cmd)
	return cmd
}

func resultCell(r client.IdemInfo) string {
	if r.State != "completed" {
		return ""
	}
	return plural(r.ResultSize, "byte", "")
}

func printIdem(w io.Writer, r client.IdemInfo) {
	fmt.Fprintf(w, "key:        %s\nstate:      %s\ntoken:      %d\nowner:      %s\nstarted:    %s\n",
		r.Key, r.State, r.Token, r.Owner, stamp(r.StartedAt, "2006-01-02 15:04:05 MST"))
	if r.State == "completed" {
		fmt.Fprintf(w, "completed:  %s\nretention:  %v\nresult:     %s\n",
			stamp(r.CompletedAt, "2006-01-02 15:04:05 MST"), r.Retention, plural(r.ResultSize, "byte", ""))
	}
}
