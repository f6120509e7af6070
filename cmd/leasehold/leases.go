package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
	"github.com/spf13/cobra"
)

type acquireFlags struct {
	ttl, lockDelay, maxHold time.Duration
	wait                    waitFlag
	owner, operation        string
	metadata                []string
	limit                   int
	out                     *output
}

// parseMetadata turns repeated --metadata k=v flags into a map.
func parseMetadata(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	md := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--metadata %q: want KEY=VALUE, such as --metadata ticket=OPS-12", kv)
		}
		md[k] = v
	}
	return md, nil
}

func defaultOwner() string { return client.DefaultOwner() }

func newAcquire(g *globals) *cobra.Command {
	f := &acquireFlags{}
	cmd := &cobra.Command{
		Use:   "acquire RESOURCE...",
		Short: "Take a lease on all RESOURCEs and print its id, secret and fencing token",
		Long: "Takes a lease and exits. The lease lives until its TTL unless renewed or released\n" +
			"(leasehold release --lease ID --secret S). Keep the secret out of logs.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			md, err := parseMetadata(f.metadata)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			l, err := inLine(g.commandSpan(cmd.Context(), cmd), g, f.wait, func(ctx context.Context, wait time.Duration) (*client.Lease, error) {
				return c.AcquireMany(ctx, args, client.TTL(f.ttl), client.Wait(wait),
					client.Owner(f.owner), client.Operation(f.operation), client.LockDelay(f.lockDelay),
					client.MaxHold(f.maxHold), client.Metadata(md), client.ManualRenew(), client.Semaphore(f.limit))
			})
			if err != nil {
				return err
			}
			deadline := l.Deadline()
			a := cliout.Acquired{
				LeaseID: l.ID(), Secret: l.Secret(), Token: l.Token(), Resources: l.Resources(),
				Slot: l.Slot(), Limit: f.limit, TTL: cliout.Dur(f.ttl), ExpiresIn: cliout.Dur(f.ttl),
				SafeDeadline: cliout.Time(deadline), SafeFor: cliout.Dur(time.Until(deadline)),
			}
			return f.out.print(cmd.OutOrStdout(), a, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "lease_id:   %d\nsecret:     %s\ntoken:      %d\nresources:  %s\n"+
					"expires:    in %s on the server (its countdown; unless renewed)\n"+
					"safe until: %s (in %s): this client's own deadline, earlier than the server's\n"+
					"            expiry by the request's round trip and a clock-drift allowance; stop work by then\n",
					a.LeaseID, a.Secret, a.Token, strings.Join(a.Resources, ", "), a.ExpiresIn,
					deadline.Format("15:04:05.000"), a.SafeFor)
				if err == nil && a.Slot != "" {
					_, err = fmt.Fprintf(w, "slot:       %s of %d (fence the slot with the token)\n", a.Slot, a.Limit)
				}
				return err
			})
		},
	}
	fl := cmd.Flags()
	durationVar(fl, &f.ttl, "ttl", leasehold.DefaultTTL, "lease time to live (100ms to 1h)")
	waitVar(fl, &f.wait, 0, "how long to queue if a resource is held: a duration, or forever (until granted or interrupted); 0: fail at once")
	durationVar(fl, &f.lockDelay, "lock-delay", 0, "keep the resources blocked this long after an expiry")
	durationVar(fl, &f.maxHold, "max-hold", 0, "end the lease at this age however often it is renewed")
	fl.StringVar(&f.owner, "owner", defaultOwner(), "who holds the lease (shown to operators)")
	fl.StringVar(&f.operation, "operation", "", "what the holder does (shown to operators)")
	fl.StringArrayVar(&f.metadata, "metadata", nil, "KEY=VALUE shown to operators with the lease (repeatable)")
	fl.IntVar(&f.limit, "limit", 0, "make RESOURCE a semaphore of this many concurrent holders (0: a lock)")
	f.out = addOutput(cmd)
	return cmd
}

// leaseSecret is --secret, or env LEASEHOLD_SECRET (which ps does not show).
func leaseSecret(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv("LEASEHOLD_SECRET")
}

func newRenew(g *globals) *cobra.Command {
	var id uint64
	var secret, progress string
	var keep bool
	var out *output
	cmd := &cobra.Command{
		Use:   "renew --lease ID --secret S [--progress NOTE] [--keep-alive]",
		Short: "Renew a lease (only its holder can), optionally reporting progress; --keep-alive: until interrupted",
		Long: "Restarts the lease's countdown from now on the server, as the Go client's renewals do,\n" +
			"and records NOTE as its last progress (leasehold locks shows it). A lease acquired with\n" +
			"leasehold acquire lives only as long as something renews it.\n\n" +
			"With --keep-alive (as etcdctl lease keep-alive) it renews a third of the TTL after each\n" +
			"renewal and prints each one (-o json: one object per line) until interrupted (SIGINT,\n" +
			"SIGTERM: exit 0, the lease then lasts out its TTL) or until the lease is lost: exit 5 when\n" +
			"the node no longer knows it (expired, released, forced) or when no renewal got through\n" +
			"before the lease's safe deadline. NOTE goes with the first renewal only.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secret = leaseSecret(secret)
			if id == 0 || secret == "" {
				return usagef("--lease and --secret (or env LEASEHOLD_SECRET) are required")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := g.commandSpan(cmd.Context(), cmd)
			w := cmd.OutOrStdout()
			if keep {
				return keepAlive(ctx, g, c, id, secret, progress, func(r cliout.Renewed) error {
					if out.JSON() {
						return writeJSONLine(w, r)
					}
					return printRenewed(w, r)
				}, cmd.ErrOrStderr())
			}
			cctx, cancel := g.ctx(ctx, 0)
			defer cancel()
			r, _, _, err := renewOnce(cctx, c, id, secret, progress)
			if err != nil {
				return err
			}
			return out.print(w, r, func(w io.Writer) error { return printRenewed(w, r) })
		},
	}
	cmd.Flags().Uint64Var(&id, "lease", 0, "lease id")
	cmd.Flags().StringVar(&secret, "secret", "", "lease secret (or env LEASEHOLD_SECRET, which ps does not show)")
	cmd.Flags().StringVar(&progress, "progress", "", "what the holder has done since the last renewal (shown to operators)")
	cmd.Flags().BoolVar(&keep, "keep-alive", false, "renew until interrupted or the lease is lost, printing each renewal")
	out = addOutput(cmd)
	return cmd
}

func printRenewed(w io.Writer, r cliout.Renewed) error {
	_, err := fmt.Fprintf(w, "renewed lease %d: expires in %s on the server\n", r.LeaseID, r.ExpiresIn)
	return err
}

func newRelease(g *globals) *cobra.Command {
	var id uint64
	var secret string
	var out *output
	cmd := &cobra.Command{
		Use:   "release --lease ID --secret S",
		Short: "Release a lease (only its holder can)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secret = leaseSecret(secret)
			if id == 0 || secret == "" {
				return usagef("--lease and --secret (or env LEASEHOLD_SECRET) are required")
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.ReleaseByID(ctx, id, secret); err != nil {
				return leaseGone(err)
			}
			return out.print(cmd.OutOrStdout(), cliout.Released{LeaseID: id, Released: true}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "released lease %d\n", id)
				return err
			})
		},
	}
	out = addOutput(cmd)
	cmd.Flags().Uint64Var(&id, "lease", 0, "lease id")
	cmd.Flags().StringVar(&secret, "secret", "", "lease secret (or env LEASEHOLD_SECRET, which ps does not show)")
	return cmd
}

func newStatus(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:               "status RESOURCE",
		Short:             "Show a resource's holder, fencing token, expiry and waiters",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, resourceNames),
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
			if out.JSON() {
				return writeJSON(w, cliout.FromResource(r))
			}
			if r.Limit > 0 {
				fmt.Fprintf(w, "%s: semaphore, %d of %s held\n", r.Resource, len(r.Slots), plural(r.Limit, "slot", ""))
				for _, h := range r.Slots {
					fmt.Fprintf(w, "  %s: lease %d, owner %s, operation %s, token %d, expires in %s\n",
						h.Resources[0], h.ID, orDash(h.Owner), orDash(h.Operation), h.Token, expiresIn(&h))
				}
			} else if r.Holder == nil {
				fmt.Fprintf(w, "%s: free\n", r.Resource)
			} else {
				h := r.Holder
				fmt.Fprintf(w, "%s: held by lease %d\n  owner:      %s\n  operation:  %s\n  token:      %d\n  ttl:        %s\n  expires in: %s\n  renewals:   %d\n",
					r.Resource, h.ID, orDash(h.Owner), orDash(h.Operation), h.Token, pdur(h.TTL), expiresIn(h), h.RenewCount)
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
	out = addOutput(cmd)
	return cmd
}

func newList(g *globals) *cobra.Command {
	var out *output
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
			return out.print(cmd.OutOrStdout(), cliout.FromLeases(all), func(w io.Writer) error {
				headers := []string{"LEASE", "TOKEN", "RESOURCES", "OWNER", "OPERATION", "EXPIRES IN", "RENEWALS"}
				if out.Wide() {
					headers = append(headers, "TTL", "ACQUIRED", "PROGRESS", "METADATA")
				}
				t := newTable(w, headers...)
				for _, l := range all {
					cells := []any{l.ID, l.Token, strings.Join(l.Resources, ","), l.Owner, l.Operation, expiresIn(&l), l.RenewCount}
					if out.Wide() {
						cells = append(cells, pdur(l.TTL), stamp(l.AcquiredAt, "2006-01-02 15:04:05"), l.Progress, metadataText(l.Metadata))
					}
					t.row(cells...)
				}
				return t.flush()
			})
		},
	}
	out = addOutput(cmd)
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
