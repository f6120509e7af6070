package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/client"
)

// The queue's message commands: send, receive, ack, nack, extend,
// dead-letters, redrive.

func newQueueSend(g *globals) *cobra.Command {
	var m client.Message
	var body, file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "send QUEUE --key KEY [--dedup-id ID] (--body TEXT | --file FILE)",
		Short: "Send one message; messages of one key are delivered in send order. --file - reads stdin",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if m.Key == "" {
				return usageError("--key is required: messages of one key are delivered in order, one at a time")
			}
			bodySet, fileSet := cmd.Flags().Changed("body"), cmd.Flags().Changed("file")
			if bodySet == fileSet {
				return usageError("give the body with exactly one of --body and --file")
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
			if asJSON {
				return printOut(cmd.OutOrStdout(), sentOut{Queue: args[0], Key: m.Key, Sequence: s.Sequence, Duplicate: s.Duplicate})
			}
			if s.Duplicate {
				fmt.Fprintf(cmd.OutOrStdout(), "sequence %d (a duplicate: nothing was enqueued)\n", s.Sequence)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sequence %d\n", s.Sequence)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&m.Key, "key", "", "the message's key (required)")
	f.StringVar(&m.DedupID, "dedup-id", "", "a resend with this id within the queue's dedup window enqueues nothing")
	f.DurationVar(&m.Delay, "delay", 0, "not deliverable before this much from now: 0 to 15m")
	f.StringVar(&body, "body", "", "the message body")
	f.StringVar(&file, "file", "", "read the body from this file (- for stdin)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func readBody(stdin io.Reader, file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(stdin)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, usageError("--file: %v", err)
	}
	return b, nil
}

func newQueueReceive(g *globals) *cobra.Command {
	var max int
	var visibility, wait time.Duration
	var consumer string
	var asJSON bool
	cmd := &cobra.Command{
		Use: "receive QUEUE [--max N] [--visibility 30s] [--wait 10s] [--json]",
		Short: "Receive up to N messages of distinct keys; ack each with its delivery id and token before its " +
			"visibility runs out, or it is delivered again",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if max < 1 || max > 100 {
				return usageError("--max must be 1 to 100, not %d", max)
			}
			if wait < 0 || wait > 20*time.Second {
				return usageError("--wait must be 0 to 20s, not %v", wait)
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
			w := cmd.OutOrStdout()
			if asJSON {
				out := receiveOut{Queue: args[0], Deliveries: []deliveryOut{}}
				for _, d := range ds {
					out.Deliveries = append(out.Deliveries, deliveryOutOf(d))
				}
				return printOut(w, out)
			}
			if len(ds) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no message ready")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "DELIVERY\tTOKEN\tKEY\tRECEIVES\tVISIBLE FOR\tBODY")
			for _, d := range ds {
				fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%s\n", d.Sequence, d.Token, clip(d.Key, 40), d.Receives,
					time.Until(d.Deadline).Round(time.Millisecond), clip(strconv.Quote(string(d.Body)), 60))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.IntVar(&max, "max", 1, "messages at most, each of another key: 1 to 100")
	f.DurationVar(&visibility, "visibility", 0, "how long the messages stay invisible to other consumers: 1s to 12h (default: the queue's)")
	f.DurationVar(&wait, "wait", 0, "if nothing is ready, wait up to this long for a message: 0 to 20s")
	f.StringVar(&consumer, "consumer", "", "this consumer's name, counted against the queue's max in flight per consumer")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// deliveryFlags are the flags that name a delivery: --delivery and --token.
func deliveryFlags(cmd *cobra.Command, d *client.Delivery) {
	cmd.Flags().Uint64Var(&d.Sequence, "delivery", 0, "the delivery id (as receive printed it; required)")
	cmd.Flags().Uint64Var(&d.Token, "token", 0, "the delivery's token (as receive printed it; required)")
}

func checkDelivery(d client.Delivery) error {
	if d.Sequence == 0 || d.Token == 0 {
		return usageError("--delivery and --token are required: receive prints them")
	}
	return nil
}

func newQueueAck(g *globals) *cobra.Command {
	var d client.Delivery
	cmd := &cobra.Command{
		Use:   "ack QUEUE --delivery ID --token T",
		Short: "Acknowledge a delivered message: it is removed, and its key's next message can be delivered",
		Args:  cobra.ExactArgs(1),
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
			return c.Ack(ctx, d)
		},
	}
	deliveryFlags(cmd, &d)
	return cmd
}

func newQueueNack(g *globals) *cobra.Command {
	var d client.Delivery
	var delay time.Duration
	var note string
	cmd := &cobra.Command{
		Use:   "nack QUEUE --delivery ID --token T [--delay 5s] [--error TEXT]",
		Short: "Give a delivered message back: it returns to the head of its key, deliverable again after --delay",
		Args:  cobra.ExactArgs(1),
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
			return c.Nack(ctx, d, delay, note)
		},
	}
	deliveryFlags(cmd, &d)
	cmd.Flags().DurationVar(&delay, "delay", 0, "deliverable again no sooner than this: 0 to 15m")
	cmd.Flags().StringVar(&note, "error", "", "why it failed, kept with the message (shown on a dead letter)")
	return cmd
}

func newQueueExtend(g *globals) *cobra.Command {
	var d client.Delivery
	var visibility time.Duration
	var progress string
	cmd := &cobra.Command{
		Use:   "extend QUEUE --delivery ID --token T --visibility 30s [--progress TEXT]",
		Short: "Keep a delivered message invisible to other consumers for --visibility more from now",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d.Queue = args[0]
			if err := checkDelivery(d); err != nil {
				return err
			}
			if visibility <= 0 {
				return usageError("--visibility is required: 1s to 12h")
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			_, err = c.Extend(ctx, d, visibility, progress)
			return err
		},
	}
	deliveryFlags(cmd, &d)
	cmd.Flags().DurationVar(&visibility, "visibility", 0, "invisible this much more from now: 1s to 12h (required)")
	cmd.Flags().StringVar(&progress, "progress", "", "what the consumer has done so far")
	return cmd
}

func newQueueDeadLetters(g *globals) *cobra.Command {
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "dead-letters QUEUE",
		Short: "List a queue's dead letters, oldest first: key, receives, last error note",
		Args:  cobra.ExactArgs(1),
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
			w := cmd.OutOrStdout()
			if asJSON {
				out := deadLettersOut{Queue: args[0], DeadLetters: []deadLetterOut{}}
				for _, d := range dead {
					out.DeadLetters = append(out.DeadLetters, deadLetterOutOf(d))
				}
				return printOut(w, out)
			}
			printDeadLetters(w, dead)
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "dead letters to list: 1 to 1000")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newQueueRedrive(g *globals) *cobra.Command {
	var max int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "redrive QUEUE [--max N]",
		Short: "Move dead letters back to their keys, oldest first, to be delivered again (admin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if max < 0 {
				return usageError("--max must be 0 (all) or more, not %d", max)
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
			if asJSON {
				return printOut(cmd.OutOrStdout(), countOut{Queue: args[0], Moved: &n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "moved %d dead letters back to their keys\n", n)
			return nil
		},
	}
	cmd.Flags().IntVar(&max, "max", 0, "dead letters to move (0: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
