package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// Keyed queues: queue create|list|show|purge|delete here, the message
// commands in queue_messages.go.

func newQueue(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "queue", Short: "Keyed queues: per-key order, leased deliveries with fencing tokens"}
	cmd.AddCommand(newQueueCreate(g), newQueueList(g), newQueueShow(g), newQueuePurge(g), newQueueDelete(g),
		newQueueSend(g), newQueueReceive(g), newQueueAck(g), newQueueNack(g), newQueueExtend(g),
		newQueueDeadLetters(g), newQueueRedrive(g))
	return cmd
}

func newQueueCreate(g *globals) *cobra.Command {
	var s client.QueueSettings
	var o *output
	cmd := &cobra.Command{
		Use:   "create QUEUE",
		Short: "Create a queue (or show it, if it exists with the same settings); zero flags take the defaults",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if s.DeadLetter != client.DeadLetterSkip && s.DeadLetter != client.DeadLetterBlock {
				return usagef("--dead-letter must be skip or block, not %q", s.DeadLetter)
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			q, err := c.CreateQueue(ctx, args[0], s)
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.FromQueue(q), func(w io.Writer) error { printQueue(w, q); return nil })
		},
	}
	f := cmd.Flags()
	f.DurationVar(&s.Visibility, "visibility", 0, "a delivery's default visibility: 1s to 12h (default 30s)")
	f.IntVar(&s.MaxReceives, "max-receives", 0, "deliveries before a message is dead-lettered: 1 to 1000 (default 5)")
	f.DurationVar(&s.Retention, "retention", 0, "how long a message is kept: 1m to 336h (default 96h)")
	f.IntVar(&s.MaxDepth, "max-depth", 0, "messages (queued, in flight, dead) at most; a send past it is refused (default 100000)")
	f.IntVar(&s.MaxBytes, "max-bytes", 0, "bytes of bodies at most (default 64 MiB)")
	f.IntVar(&s.MaxInFlightPerConsumer, "max-in-flight", 0, "deliveries in flight per consumer at most (default 1000)")
	f.DurationVar(&s.DedupWindow, "dedup-window", 0, "how long a dedup id is remembered: 1s to 24h (default 5m)")
	f.StringVar(&s.DeadLetter, "dead-letter", client.DeadLetterSkip,
		"what a key does after its head message is dead-lettered: skip (go on with the next) or block (wait for a redrive)")
	o = addOutput(cmd)
	return cmd
}

func newQueueList(g *globals) *cobra.Command {
	var prefix string
	var o *output
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the queues with their depth, messages in flight, dead letters and oldest message age",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			qs, err := c.Queues(ctx, prefix)
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.FromQueues(qs), func(w io.Writer) error {
				headers := []string{"QUEUE", "DEPTH", "IN FLIGHT", "DEAD", "KEYS", "BYTES", "OLDEST"}
				if o.Wide() {
					headers = append(headers, "VISIBILITY", "MAX RECEIVES", "MAX DEPTH", "DEAD LETTERS", "CREATED")
				}
				t := newTable(w, headers...)
				for _, q := range qs {
					cells := []any{clip(q.Name, 48), q.Depth, q.InFlight, q.Dead, q.Keys, q.Bytes, pdur(q.OldestAge)}
					if s := q.Settings; o.Wide() {
						cells = append(cells, pdur(s.Visibility), s.MaxReceives, s.MaxDepth, s.DeadLetter, stamp(q.CreatedAt, "2006-01-02 15:04:05"))
					}
					t.row(cells...)
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only queues whose name starts with this")
	o = addOutput(cmd)
	return cmd
}

func newQueueShow(g *globals) *cobra.Command {
	var limit int
	var o *output
	cmd := &cobra.Command{
		Use: "show QUEUE",
		Short: "Show a queue: depth, in flight, oldest message age, the keys with a message in flight (slowest first) " +
			"and the oldest dead letters",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, queueNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > leasehold.MaxListLimit {
				return usagef("--limit must be 1 to %d, not %d", leasehold.MaxListLimit, limit)
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			q, err := c.Queue(ctx, args[0], limit)
			if err != nil {
				return err
			}
			var dead []leasehold.DeadLetter
			if q.Dead > 0 {
				if dead, err = c.DeadLetters(ctx, args[0], limit); err != nil {
					return err
				}
			}
			out := cliout.FromQueue(q)
			out.DeadLetters = cliout.FromDeadLetters(q.Name, dead).DeadLetters
			return o.print(cmd.OutOrStdout(), out, func(w io.Writer) error { return printQueueShow(w, q, dead) })
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 10, "in-flight keys and dead letters to show")
	o = addOutput(cmd)
	return cmd
}

func newQueuePurge(g *globals) *cobra.Command {
	var reason string
	var yes bool
	var o *output
	cmd := &cobra.Command{
		Use: "purge QUEUE --reason TEXT [--yes]",
		Short: "Drop every message of a queue that is not in flight, and its dead letters (admin; audited). " +
			"Asks for confirmation unless --yes",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, queueNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := confirmAudited(cmd, reason, "why the messages are dropped", yes,
				fmt.Sprintf("Drop every queued and dead message of %q? Type yes: ", args[0]), "not purged"); err != nil {
				return err
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			n, err := c.PurgeQueue(ctx, args[0], reason)
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.Purged{Queue: args[0], Dropped: n}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "dropped %s of %s\n", plural(n, "message", ""), args[0])
				return err
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the audit log (required)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	o = addOutput(cmd)
	return cmd
}

func newQueueDelete(g *globals) *cobra.Command {
	var reason string
	var yes bool
	var o *output
	cmd := &cobra.Command{
		Use:               "delete QUEUE --reason TEXT [--yes]",
		Short:             "Delete a queue and everything in it (admin; audited). Asks for confirmation unless --yes",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, queueNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := confirmAudited(cmd, reason, "why the queue is deleted", yes,
				fmt.Sprintf("Delete queue %q and every message in it? Type yes: ", args[0]), "not deleted"); err != nil {
				return err
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.DeleteQueue(ctx, args[0], reason); err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), cliout.QueueDeleted{Queue: args[0], Deleted: true}, func(io.Writer) error {
				fmt.Fprintf(cmd.ErrOrStderr(), "deleted %s\n", args[0])
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the audit log (required)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	o = addOutput(cmd)
	return cmd
}

func printQueue(w io.Writer, q client.QueueInfo) {
	s := q.Settings
	fmt.Fprintf(w, "queue:       %s\ndepth:       %d (%s, %s)\nin flight:   %d\ndead:        %d\noldest:      %s\n",
		q.Name, q.Depth, plural(q.Bytes, "byte", ""), plural(q.Keys, "key", ""), q.InFlight, q.Dead, pdur(q.OldestAge))
	fmt.Fprintf(w, "settings:    visibility %v, max receives %d, retention %v, max depth %d, max bytes %d, "+
		"max in flight per consumer %d, dedup window %v, dead letters %s\n",
		s.Visibility, s.MaxReceives, s.Retention, s.MaxDepth, s.MaxBytes, s.MaxInFlightPerConsumer, s.DedupWindow, s.DeadLetter)
}

// printQueueShow is show's human form: the queue, its keys in flight and
// its oldest dead letters.
func printQueueShow(w io.Writer, q client.QueueInfo, dead []leasehold.DeadLetter) error {
	printQueue(w, q)
	if len(q.InFlightKeys) > 0 {
		fmt.Fprintln(w, "\nin flight, slowest first:")
		t := newTable(w, "KEY", "SEQUENCE", "TOKEN", "RECEIVES", "AGE", "CONSUMER")
		for _, k := range q.InFlightKeys {
			t.row(clip(k.Key, 40), k.Sequence, k.Token, k.Receives, age(k.SentAt), clip(k.Consumer, 32))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(dead) > 0 {
		fmt.Fprintln(w, "\ndead letters, oldest first:")
		return printDeadLetters(w, dead)
	}
	return nil
}

func printDeadLetters(w io.Writer, dead []leasehold.DeadLetter) error {
	t := newTable(w, "SEQUENCE", "KEY", "RECEIVES", "DIED", "NOTE")
	for _, d := range dead {
		t.row(d.Sequence, clip(d.Key, 40), d.Receives, stamp(d.DiedAt, "2006-01-02 15:04:05"), clip(d.Note, 60))
	}
	return t.flush()
}

// age is how long ago t was, or "" (shown "-") if unknown.
func age(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return pdur(time.Since(t))
}
