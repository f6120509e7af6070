package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/client"
)

// Idempotency keys: idem show and idem list.

func newIdem(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "idem", Short: "Inspect idempotency keys"}
	cmd.AddCommand(newIdemShow(g), newIdemList(g))
	return cmd
}

func newIdemShow(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show KEY",
		Short: "Show one idempotency key: its state, attempt token, owner, age and result size",
		Args:  cobra.ExactArgs(1),
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
			w := cmd.OutOrStdout()
			if asJSON {
				return printJSON(w, idemWire(r))
			}
			printIdem(w, r)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (with the result, if this token may see it)")
	return cmd
}

func newIdemList(g *globals) *cobra.Command {
	var asJSON bool
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
			w := cmd.OutOrStdout()
			if asJSON {
				out := &pb.IdempotencyListResponse{}
				for _, r := range all {
					out.Records = append(out.Records, idemWire(r))
				}
				return printJSON(w, out)
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tSTATE\tTOKEN\tOWNER\tSTARTED\tRESULT")
			for _, r := range all {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", clip(r.Key, 48), r.State, r.Token, clip(r.Owner, 24),
					stamp(r.StartedAt, "2006-01-02 15:04:05"), resultCell(r))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only keys starting with this")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func resultCell(r client.IdemInfo) string {
	if r.State != "completed" {
		return "-"
	}
	return fmt.Sprintf("%d bytes", r.ResultSize)
}

func printIdem(w io.Writer, r client.IdemInfo) {
	fmt.Fprintf(w, "key:        %s\nstate:      %s\ntoken:      %d\nowner:      %s\nstarted:    %s\n",
		r.Key, r.State, r.Token, r.Owner, stamp(r.StartedAt, "2006-01-02 15:04:05 MST"))
	if r.State == "completed" {
		fmt.Fprintf(w, "completed:  %s\nretention:  %v\nresult:     %d bytes\n",
			stamp(r.CompletedAt, "2006-01-02 15:04:05 MST"), r.Retention, r.ResultSize)
	}
}

func idemWire(r client.IdemInfo) *pb.IdemRecord {
	state := pb.IdemState_IDEM_STATE_IN_PROGRESS
	if r.State == "completed" {
		state = pb.IdemState_IDEM_STATE_COMPLETED
	}
	out := &pb.IdemRecord{Key: r.Key, State: state, Token: r.Token, Owner: r.Owner,
		StartedAt: timestamppb.New(r.StartedAt), ResultSize: uint64(r.ResultSize), Result: r.Result}
	if !r.CompletedAt.IsZero() {
		out.CompletedAt, out.Retention = timestamppb.New(r.CompletedAt), durationpb.New(r.Retention)
	}
	return out
}
