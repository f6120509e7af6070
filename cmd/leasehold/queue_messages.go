package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// The queue's message commands: send, receive, ack, nack, extend,
// dead-letters, redrive.

func newQueueSend(g *globals) *cobra.Command {
	var m leasehold.Message
	var body, file string
	var o *output
	cmd := &cobra.Command{
		Use:               "send QUEUE --key KEY [--dedup-id ID] (--body TEXT | --file FILE)",
		Short:             "Send one message; messages of one key are delivered in send order. --file - reads stdin",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, queueNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if m.Key == "" {
				return usagef("--key is required: messages of one key are delivered in order, one at a time")
			}
			bodySet, fileSet := cmd.Flags().Changed("body"), cmd.Flags().Changed("file")
			if bodySet == fileSet {
				return usagef("give the body with exactly one of --body and --file")
			}
			m.Body = []byte(body)
			if fileSet {
				var err error
				if m.Body, err = readBody(cmd.InOrStdin(), file); err != nil {
					return err
				}
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			s, err := c.Send(ctx, args[0], m)
			if err != nil {
				return err
			}
			out := cliout.Sent{Queue: args[0], Key: m.Key, Sequence: s.Sequence, Duplicate: s.Duplicate}
			return o.print(cmd.OutOrStdout(), out, func(w io.Writer) error {
				if s.Duplicate {
					_, err := fmt.Fprintf(w, "sequence %d (a duplicate: nothing was enqueued)\n", s.Sequence)
					return err
				}
				_, err := fmt.Fprintf(w, "sequence %d\n", s.Sequence)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&m.Key, "key", "", "the message's key (required)")
	f.StringVar(&m.DedupID, "dedup-id", "", "a resend with this id within the queue's dedup window enqueues nothing")
	f.DurationVar(&m.Delay, "delay", 0, "not deliverable before this much from now: 0 to 15m")
	f.StringVar(&body, "body", "", "the message body")
	f.StringVar(&file, "file", "", "read the body from this file (- for stdin)")
	o = addOutput(cmd)
	return cmd
}

func readBody(stdin io.Reader, file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(stdin)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, usagef("--file: %v", err)
	}
	return b, nil
}

func newQueueReceive(g *globals) *cobra.Command {
	var max int
	var visibility, wait time.Duration
	var consumer string
	var o *output
	cmd := &cobra.Command{
		Use: "receive QUEUE [--max N] [--visibility 30s] [--wait 10s] [--json]",
		Short: "Receive up to N messages of distinct keys; ack each with its sequence and token before its " +
			"visibility runs out, or it is delivered again",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, queueNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if max < 1 || max > leasehold.MaxQueueBatch {
				return usagef("--max must be 1 to %d, not %d", leasehold.MaxQueueBatch, max)
			}
			if wait < 0 || wait > leasehold.MaxQueueWait {
				return usagef("--wait must be 0 to 20s, not %v", wait)
			}
			c, ctx, cancel, err := g.session(cmd, wait)
			if err != nil {
				return err
			}
			defer cancel()
			ds, err := c.Receive(ctx, args[0], max, client.VisibilityTimeout(visibility), client.PollWait(wait),
				client.ConsumerName(consumer))
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.FromDeliveries(args[0], ds), func(w io.Writer) error {
				if len(ds) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no message ready")
					return nil
				}
				headers := []string{"SEQUENCE", "TOKEN", "KEY", "RECEIVES", "VISIBLE FOR", "BODY"}
				if o.Wide() {
					headers = append(headers, "SENT", "BYTES")
				}
				t := newTable(w, headers...)
				for _, d := range ds {
					cells := []any{d.Sequence, d.Token, clip(d.Key, 40), d.Receives, pdur(time.Until(d.Deadline)),
						clip(strconv.Quote(string(d.Body)), 60)}
					if o.Wide() {
						cells = append(cells, stamp(d.SentAt, "2006-01-02 15:04:05.000"), len(d.Body))
					}
					t.row(cells...)
				}
				return t.flush()
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&max, "max", 1, "messages at most, each of another key: 1 to 100")
	f.DurationVar(&visibility, "visibility", 0, "how long the messages stay invisible to other consumers: 1s to 12h (default: the queue's)")
	f.DurationVar(&wait, "wait", 0, "if nothing is ready, wait up to this long for a message: 0 to 20s")
	f.StringVar(&consumer, "consumer", "", "this consumer's name, counted against the queue's max in flight per consumer")
	o = addOutput(cmd)
	return cmd
}

// deliveryFlags are the flags that name a delivery: --sequence (the
// message's, as send and receive print it) and --token (the delivery's).
// --delivery is --sequence's old name.
func deliveryFlags(cmd *cobra.Command, d *leasehold.Delivery) {
	cmd.Flags().Uint64Var(&d.Sequence, "sequence", 0, "the message's sequence (as receive printed it; required)")
	cmd.Flags().Uint64Var(&d.Sequence, "delivery", 0, "the message's sequence")
	cmd.Flags().MarkDeprecated("delivery", "use --sequence")
	cmd.Flags().Uint64Var(&d.Token, "token", 0, "the delivery's token (as receive printed it; required)")
	cmd.Flags().StringVar(&d.Consumer, "consumer", "", "the consumer name receive was given (only that consumer may settle the delivery)")
}

func checkDelivery(d leasehold.Delivery) error {
	if d.Sequence == 0 || d.Token == 0 {
		return usagef("--sequence and --token are required: receive prints them")
	}
	return nil
}

func newQueueAck(g *globals) *cobra.Command {
	var d leasehold.Delivery
	var o *output
	cmd := &cobra.Command{
		Use:               "ack QUEUE --sequence N --token T",
		Short:             "Acknowledge a delivered message: it is removed, and its key's next message can be delivered",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, queueNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			d.Queue = args[0]
			if err := checkDelivery(d); err != nil {
				return err
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.Ack(ctx, d); err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.Acked{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "acked sequence %d of %s\n", d.Sequence, d.Queue)
				return err
			})
		},
	}
	deliveryFlags(cmd, &d)
	o = addOutput(cmd)
	return cmd
}

func newQueueNack(g *globals) *cobra.Command {
	var d leasehold.Delivery
	var delay time.Duration
	var note string
	var o *output
	cmd := &cobra.Command{
		Use:               "nack QUEUE --sequence N --token T [--delay 5s] [--error TEXT]",
		Short:             "Give a delivered message back: it returns to the head of its key, deliverable again after --delay",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, queueNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			d.Queue = args[0]
			if err := checkDelivery(d); err != nil {
				return err
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.Nack(ctx, d, delay, note); err != nil {
				return err
			}
			out := cliout.Nacked{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token, Delay: cliout.Dur(delay)}
			return o.print(cmd.OutOrStdout(), out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "gave back sequence %d of %s, deliverable again in %s\n", d.Sequence, d.Queue, out.Delay)
				return err
			})
		},
	}
	deliveryFlags(cmd, &d)
	o = addOutput(cmd)
	cmd.Flags().DurationVar(&delay, "delay", 0, "deliverable again no sooner than this: 0 to 15m")
	cmd.Flags().StringVar(&note, "error", "", "why it failed, kept with the message (shown on a dead letter)")
	return cmd
}

func newQueueExtend(g *globals) *cobra.Command {
	var d leasehold.Delivery
	var visibility time.Duration
	var progress string
	var o *output
	cmd := &cobra.Command{
		Use:               "extend QUEUE --sequence N --token T --visibility 30s [--progress TEXT]",
		Short:             "Keep a delivered message invisible to other consumers for --visibility more from now",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, queueNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			d.Queue = args[0]
			if err := checkDelivery(d); err != nil {
				return err
			}
			if visibility <= 0 {
				return usagef("--visibility is required: 1s to 12h")
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			deadline, err := c.Extend(ctx, d, visibility, progress)
			if err != nil {
				return err
			}
			out := cliout.Extended{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token, SafeDeadline: cliout.Time(deadline)}
			return o.print(cmd.OutOrStdout(), out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "sequence %d of %s is yours for %s more\n", d.Sequence, d.Queue, pdur(time.Until(deadline)))
				return err
			})
		},
	}
	deliveryFlags(cmd, &d)
	o = addOutput(cmd)
	cmd.Flags().DurationVar(&visibility, "visibility", 0, "invisible this much more from now: 1s to 12h (required)")
	cmd.Flags().StringVar(&progress, "progress", "", "what the consumer has done so far")
	return cmd
}

func newQueueDeadLetters(g *globals) *cobra.Command {
	var limit int
	var o *output
	cmd := &cobra.Command{
		Use:               "dead-letters QUEUE",
		Short:             "List a queue's dead letters, oldest first: key, receives, last error note",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, queueNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			dead, err := c.DeadLetters(ctx, args[0], limit)
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.FromDeadLetters(args[0], dead), func(w io.Writer) error {
				return printDeadLetters(w, dead)
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "dead letters to list: 1 to 1000")
	o = addOutput(cmd)
	return cmd
}

func newQueueRedrive(g *globals) *cobra.Command {
	var max int
	var o *output
	cmd := &cobra.Command{
		Use:               "redrive QUEUE [--max N]",
		Short:             "Move dead letters back to their keys, oldest first, to be delivered again (admin)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, queueNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if max < 0 {
				return usagef("--max must be 0 (all) or more, not %d", max)
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			n, err := c.Redrive(ctx, args[0], max)
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.Redriven{Queue: args[0], Moved: n}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "moved %s back to their keys\n", plural(n, "dead letter", ""))
				return err
			})
		},
	}
	cmd.Flags().IntVar(&max, "max", 0, "dead letters to move (0: all)")
	o = addOutput(cmd)
	return cmd
}
