package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// leasehold barrier: list, show, create, arrive, count-down, wait, reset,
// delete (docs/barriers.md).

func newBarrier(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "barrier",
		Short: "Barriers and latches: hold parties back until all have arrived, or until a count reaches zero",
		Long: `A cyclic barrier of N parties trips when N parties have arrived (each arrival is a
lease: a party that dies before the trip is no longer counted) and opens its next
phase. A latch of N trips when counted down N times, and stays tripped until reset.
A phase ends once: tripped (with a fencing token), timed out, or reset.`,
	}
	cmd.AddCommand(newBarrierList(g), newBarrierShow(g), newBarrierCreate(g), newBarrierArrive(g), newBarrierCountDown(g),
		newBarrierWait(g), newBarrierReset(g), newBarrierDelete(g))
	return cmd
}

func barrierNames(ctx context.Context, c *client.Client, prefix string) []string {
	bs, _ := c.Barriers(ctx, prefix)
	return namesOf(bs, func(b client.Barrier) string { return b.Name })
}

func newBarrierList(g *globals) *cobra.Command {
	var o *output
	var prefix string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List barriers and latches by name: kind, parties, phase, arrived, trips",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			bs, err := c.Barriers(ctx, prefix)
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.FromBarriers(bs), func(w io.Writer) error {
				if len(bs) == 0 {
					fmt.Fprintln(w, "no barriers")
					return nil
				}
				t := newTable(w, "BARRIER", "KIND", "PARTIES", "PHASE", "ARRIVED", "TRIPS", "BROKEN", "TIMEOUT")
				for _, b := range bs {
					t.row(clip(b.Name, 48), b.Kind, b.Parties, b.Phase, arrivedCell(b), b.Trips, b.Broken, pdur(b.Timeout))
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only barriers whose name starts with this")
	o = addOutput(cmd)
	return cmd
}

// arrivedCell is a barrier's count of its phase, "tripped" for a tripped
// latch.
func arrivedCell(b client.Barrier) string {
	if b.Tripped {
		return "tripped"
	}
	return fmt.Sprintf("%d/%d", b.Arrived, b.Parties)
}

func newBarrierShow(g *globals) *cobra.Command {
	var o *output
	cmd := &cobra.Command{
		Use:               "show BARRIER",
		Short:             "Show a barrier: its phase, the parties arrived and their leases, and how the last phases ended",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, barrierNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			b, err := c.GetBarrier(ctx, args[0])
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.FromBarrier(b), func(w io.Writer) error {
				fmt.Fprintf(w, "barrier:  %s (%s, %d parties, timeout %s)\nphase:    %d, %s arrived\ntrips:    %d, broken %d\n",
					b.Name, b.Kind, b.Parties, pdur(b.Timeout), b.Phase, arrivedCell(b), b.Trips, b.Broken)
				if len(b.Arrivals) > 0 {
					t := newTable(w, "PARTICIPANT", "LEASE", "ARRIVED")
					for _, a := range b.Arrivals {
						t.row(clip(a.Participant, 48), a.LeaseID, stamp(a.ArrivedAt, "2006-01-02 15:04:05"))
					}
					if err := t.flush(); err != nil {
						return err
					}
				}
				if len(b.Ends) > 0 {
					t := newTable(w, "PHASE", "OUTCOME", "TOKEN", "ARRIVED", "ENDED")
					for _, e := range b.Ends {
						t.row(e.Phase, e.Outcome, e.Token, e.Arrived, stamp(e.At, "2006-01-02 15:04:05"))
					}
					return t.flush()
				}
				return nil
			})
		},
	}
	o = addOutput(cmd)
	return cmd
}

func newBarrierCreate(g *globals) *cobra.Command {
	var o *output
	var parties int
	var latch bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "create BARRIER --parties N [--latch] [--timeout D]",
		Short: "Create a cyclic barrier of N parties, or a latch of count N (again, alike: the same one)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if parties < 1 || parties > leasehold.MaxBarrierParties {
				return usagef("--parties is %d; it must be between 1 and %d", parties, leasehold.MaxBarrierParties)
			}
			opts := []client.BarrierOption{}
			if latch {
				opts = append(opts, client.Latch())
			}
			if timeout != 0 {
				opts = append(opts, client.PhaseTimeout(timeout))
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			b, err := c.CreateBarrier(ctx, args[0], parties, opts...)
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.FromBarrier(b), func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "barrier %s: %s of %d parties, at phase %d\n", b.Name, b.Kind, b.Parties, b.Phase)
				return err
			})
		},
	}
	cmd.Flags().IntVar(&parties, "parties", 0, "parties to arrive (a latch: the count to count down), 1 to 10000 (required)")
	cmd.Flags().BoolVar(&latch, "latch", false, "a latch: counted down, it trips at zero and stays tripped until reset")
	durationVar(cmd.Flags(), &timeout, "timeout", 0, "break a phase not tripped this long after its first arrival (1s to 24h; 0: never)")
	o = addOutput(cmd)
	return cmd
}

func newBarrierArrive(g *globals) *cobra.Command {
	var o *output
	var as string
	var ttl, wait time.Duration
	var phase uint64
	cmd := &cobra.Command{
		Use:   "arrive BARRIER [--as NAME] [--wait D]",
		Short: "Arrive at a cyclic barrier and wait for its phase to trip (the arrival is a lease, renewed meanwhile)",
		Long: `Arrives as a party of BARRIER's current phase and waits, up to --wait, for the phase
to end. Exits 0 once it tripped, printing the phase and its fencing token; 1 if it
ended broken (timed out or reset); 4 if --wait ran out first; 5 if the arrival's
lease was lost (the party is then no longer counted) or the phase named by --phase
has ended. A party that gives up (--wait, or an interrupt) withdraws its arrival.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, barrierNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, wait)
			if err != nil {
				return err
			}
			defer cancel()
			opts := []client.ArriveOption{client.ArrivalTTL(ttl)}
			if as != "" {
				opts = append(opts, client.As(as))
			}
			if phase != 0 {
				opts = append(opts, client.InPhase(phase))
			}
			wctx, stop := context.WithTimeout(ctx, wait) // ends before ctx, which allows --timeout more
			defer stop()
			end, err := c.Await(wctx, args[0], opts...)
			if err != nil {
				return barrierWaitError(err, wctx, ctx, args[0], wait)
			}
			return printPhaseEnd(cmd, o, args[0], end)
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "the party's name, unique in a phase (default: HOST/PID)")
	durationVar(cmd.Flags(), &ttl, "ttl", leasehold.DefaultTTL, "the arrival lease's time to live (100ms to 1h)")
	durationVar(cmd.Flags(), &wait, "wait", time.Hour, "how long to wait for the phase to end")
	cmd.Flags().Uint64Var(&phase, "phase", 0, "arrive only in this phase (0: the current one)")
	o = addOutput(cmd)
	return cmd
}

// barrierWaitError is the error of a wait that did not see its phase end:
// a wait that ran out (ctx, the wait's own, ended while parent had not) is
// a wait timeout.
func barrierWaitError(err error, ctx, parent context.Context, name string, wait time.Duration) error {
	if ctx.Err() != nil && parent.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return leasehold.Errorf(leasehold.CodeWaitTimeout, "barrier %s: the phase did not end within --wait %v", name, wait)
	}
	if errors.Is(err, client.ErrLeaseLost) {
		return exitError{code: exitNotHolder, err: err}
	}
	return err
}

func printPhaseEnd(cmd *cobra.Command, o *output, name string, e client.PhaseEnd) error {
	return o.print(cmd.OutOrStdout(), cliout.PhaseEnded{Barrier: name, PhaseEnd: cliout.FromPhaseEnd(e)}, func(w io.Writer) error {
		if e.Outcome == "tripped" {
			_, err := fmt.Fprintf(w, "phase %d of %s tripped (token %d)\n", e.Phase, name, e.Token)
			return err
		}
		_, err := fmt.Fprintf(w, "phase %d of %s ended %s (%d arrived)\n", e.Phase, name, e.Outcome, e.Arrived)
		return err
	})
}

func newBarrierCountDown(g *globals) *cobra.Command {
	var o *output
	var count int
	cmd := &cobra.Command{
		Use:               "count-down LATCH [--count N]",
		Short:             "Count a latch down (by 1, or --count); at zero it trips",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, barrierNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 || count > leasehold.MaxBarrierParties {
				return usagef("--count is %d; it must be between 1 and %d", count, leasehold.MaxBarrierParties)
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			b, end, err := c.CountDown(ctx, args[0], count)
			if err != nil {
				return err
			}
			out := cliout.CountedDown{Barrier: args[0], Phase: b.Phase, Counted: b.Arrived, Parties: b.Parties, Tripped: end != nil}
			if end != nil {
				out.Phase, out.Token = end.Phase, end.Token
			}
			return o.print(cmd.OutOrStdout(), out, func(w io.Writer) error {
				if end != nil {
					_, err := fmt.Fprintf(w, "%s tripped at phase %d (token %d)\n", args[0], end.Phase, end.Token)
					return err
				}
				_, err := fmt.Fprintf(w, "%s: %d of %d counted down at phase %d\n", args[0], b.Arrived, b.Parties, b.Phase)
				return err
			})
		},
	}
	cmd.Flags().IntVar(&count, "count", 1, "how much to count down")
	o = addOutput(cmd)
	return cmd
}

func newBarrierWait(g *globals) *cobra.Command {
	var o *output
	var wait time.Duration
	var phase uint64
	cmd := &cobra.Command{
		Use:   "wait BARRIER [--phase N] [--wait D]",
		Short: "Wait for a phase of a barrier or latch to end (it only reads: leaving early changes nothing)",
		Long: `Waits, up to --wait, for BARRIER's phase (--phase, default the current one) to end.
Exits 0 once it tripped, printing its fencing token; 1 if it ended broken (timed out
or reset); 4 if --wait ran out first; 6 if there is no such barrier (or it was deleted).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, barrierNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, wait)
			if err != nil {
				return err
			}
			defer cancel()
			wctx, stop := context.WithTimeout(ctx, wait) // ends before ctx, which allows --timeout more
			defer stop()
			end, err := c.WaitPhase(wctx, args[0], phase)
			if err != nil {
				return barrierWaitError(err, wctx, ctx, args[0], wait)
			}
			return printPhaseEnd(cmd, o, args[0], end)
		},
	}
	durationVar(cmd.Flags(), &wait, "wait", time.Hour, "how long to wait")
	cmd.Flags().Uint64Var(&phase, "phase", 0, "the phase to wait for (0: the current one)")
	o = addOutput(cmd)
	return cmd
}

func newBarrierReset(g *globals) *cobra.Command {
	var o *output
	cmd := &cobra.Command{
		Use:               "reset BARRIER",
		Short:             "End the current phase (broken, if it had not tripped: its parties' arrivals end) and open the next",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, barrierNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			end, err := c.ResetBarrier(ctx, args[0])
			if err != nil {
				return err
			}
			return printPhaseEnd(cmd, o, args[0], end)
		},
	}
	o = addOutput(cmd)
	return cmd
}

func newBarrierDelete(g *globals) *cobra.Command {
	var o *output
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete BARRIER [--yes]",
		Short: "Delete a barrier: its parties' arrivals end, and its waiters are told it is gone",
		Long: `Deletes BARRIER: the arrivals of its current phase end, and every wait for it answers
not found. Asks for confirmation unless --yes; without a terminal it needs --yes.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, barrierNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := confirm(cmd, yes, fmt.Sprintf("Delete barrier %s? Type yes: ", args[0]), "not deleted"); err != nil {
				return err
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.DeleteBarrier(ctx, args[0]); err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.BarrierDeleted{Barrier: args[0], Deleted: true}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "deleted barrier %s\n", args[0])
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	o = addOutput(cmd)
	return cmd
}
