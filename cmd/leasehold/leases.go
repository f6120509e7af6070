package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/client"
)

type acquireFlags struct {
	ttl, wait, lockDelay, maxHold time.Duration
	owner, operation              string
	limit                         int
	json                          bool
}

func defaultOwner() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", h, os.Getpid())
}

func newAcquire(g *globals) *cobra.Command {
	f := &acquireFlags{}
	cmd := &cobra.Command{
		Use:   "acquire RESOURCE...",
		Short: "Take a lease on all RESOURCEs and print its id, secret and fencing token",
		Long: "Takes a lease and exits. The lease lives until its TTL unless renewed or released\n" +
			"(leasehold release --lease ID --secret S). Keep the secret out of logs.\n" +
			"With --limit N, RESOURCE is a semaphore: up to N holders at once, each granted one\n" +
			"slot (RESOURCE#1..RESOURCE#N) that its token fences.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, f.wait)
			if err != nil {
				return err
			}
			defer cancel()
			l, err := c.AcquireMany(ctx, args, client.TTL(f.ttl), client.Wait(f.wait),
				client.Owner(f.owner), client.Operation(f.operation), client.LockDelay(f.lockDelay),
				client.MaxHold(f.maxHold), client.ManualRenew(), client.Semaphore(f.limit))
			if err != nil {
				return err
			}
			out := struct {
				LeaseID   uint64   `json:"lease_id"`
				Secret    string   `json:"secret"`
				Token     uint64   `json:"token"`
				Resources []string `json:"resources"`
				Slot      string   `json:"slot,omitempty"`
				Limit     int      `json:"limit,omitempty"`
				ExpiresIn string   `json:"expires_in"`
			}{l.ID(), l.Secret(), l.Token(), l.Resources(), l.Slot(), f.limit, time.Until(l.Deadline()).Round(time.Millisecond).String()}
			w := cmd.OutOrStdout()
			if f.json {
				return json.NewEncoder(w).Encode(out)
			}
			fmt.Fprintf(w, "lease_id:  %d\nsecret:    %s\ntoken:     %d\nresources: %s\n",
				out.LeaseID, out.Secret, out.Token, strings.Join(out.Resources, ", "))
			if out.Slot != "" {
				fmt.Fprintf(w, "slot:      %s of %d (fence the slot with the token)\n", out.Slot, out.Limit)
			}
			fmt.Fprintf(w, "expires:   in %s (unless renewed)\n", out.ExpiresIn)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.ttl, "ttl", 15*time.Second, "lease time to live (100ms to 1h)")
	fl.DurationVar(&f.wait, "wait", 0, "how long to queue if a resource is held (0: fail at once)")
	fl.DurationVar(&f.lockDelay, "lock-delay", 0, "keep the resources blocked this long after an expiry")
	fl.DurationVar(&f.maxHold, "max-hold", 0, "end the lease at this age however often it is renewed")
	fl.StringVar(&f.owner, "owner", defaultOwner(), "who holds the lease (shown to operators)")
	fl.StringVar(&f.operation, "operation", "", "what the holder does (shown to operators)")
	fl.IntVar(&f.limit, "limit", 0, "make RESOURCE a semaphore of this many concurrent holders (0: a lock)")
	fl.BoolVar(&f.json, "json", false, "print JSON")
	return cmd
}

func newRelease(g *globals) *cobra.Command {
	var id uint64
	var secret string
	cmd := &cobra.Command{
		Use:   "release --lease ID --secret S",
		Short: "Release a lease (only its holder can)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if secret == "" {
				secret = os.Getenv("LEASEHOLD_SECRET")
			}
			if id == 0 || secret == "" {
				return fmt.Errorf("--lease and --secret (or env LEASEHOLD_SECRET) are required")
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.ReleaseByID(ctx, id, secret); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "released lease %d\n", id)
			return nil
		},
	}
	cmd.Flags().Uint64Var(&id, "lease", 0, "lease id")
	cmd.Flags().StringVar(&secret, "secret", "", "lease secret (or env LEASEHOLD_SECRET, which ps does not show)")
	return cmd
}

func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: false}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func newStatus(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status RESOURCE",
		Short: "Show a resource's holder, fencing token, expiry and waiters",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			r, err := c.Get(ctx, args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return printJSON(w, resourceWire(r))
			}
			if r.Limit > 0 {
				fmt.Fprintf(w, "%s: semaphore, %d of %d slots held\n", r.Resource, len(r.Slots), r.Limit)
				for _, h := range r.Slots {
					fmt.Fprintf(w, "  %s: lease %d, owner %s, operation %s, token %d, expires in %s\n",
						h.Resources[0], h.ID, orDash(h.Owner), orDash(h.Operation), h.Token, expiresIn(&h))
				}
			} else if r.Holder == nil {
				fmt.Fprintf(w, "%s: free\n", r.Resource)
			} else {
				h := r.Holder
				fmt.Fprintf(w, "%s: held by lease %d\n  owner:      %s\n  operation:  %s\n  token:      %d\n  ttl:        %s\n  expires in: %s\n  renewals:   %d\n",
					r.Resource, h.ID, h.Owner, h.Operation, h.Token, pdur(h.TTL), expiresIn(h), h.RenewCount)
				if h.Progress != "" {
					fmt.Fprintf(w, "  progress:   %s\n", h.Progress)
				}
			}
			if r.LockDelay != 0 {
				fmt.Fprintf(w, "  in lock-delay (%s) after an expiry\n", pdur(r.LockDelay))
			}
			for i, wt := range r.Waiters {
				fmt.Fprintf(w, "  waiter %d: owner %s, operation %s, waiting up to %s\n", i+1, wt.Owner, wt.Operation, pdur(wt.Wait))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newList(g *globals) *cobra.Command {
	var asJSON bool
	var prefix string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List held leases",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			all, err := listAll(ctx, c, prefix)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return printJSON(w, &pb.ListResponse{Leases: leasesWire(all)})
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "LEASE\tTOKEN\tRESOURCES\tOWNER\tOPERATION\tEXPIRES IN\tRENEWALS")
			for _, l := range all {
				fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%d\n", l.ID, l.Token, strings.Join(l.Resources, ","),
					l.Owner, l.Operation, expiresIn(&l), l.RenewCount)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&prefix, "prefix", "", "only leases on resources with this prefix")
	return cmd
}

func listAll(ctx context.Context, c *client.Client, prefix string) ([]client.LeaseInfo, error) {
	var all []client.LeaseInfo
	for l, err := range c.Leases(ctx, prefix) {
		if err != nil {
			return nil, err
		}
		all = append(all, l)
	}
	return all, nil
}
