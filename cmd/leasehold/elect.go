package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

type electFlags struct {
	value, owner string
	ttl, grace   time.Duration
	cgroup       string
	observe      bool
	verbose      bool
	out          *output
}

func newElect(g *globals) *cobra.Command {
	f := &electFlags{}
	cmd := &cobra.Command{
		Use:   "elect NAME [flags] -- CMD [ARGS...] | elect NAME --observe [-o json]",
		Short: "Run a command only while leading the election NAME",
		Long: `Campaigns in the election NAME (candidates lead in arrival order) and, once
leading, runs CMD with LEASEHOLD_TOKEN (the term's fencing token),
LEASEHOLD_ELECTION and LEASEHOLD_LEASE_ID in its environment. Leadership is a
lease and CMD is kept exactly as by "leasehold run": if leadership cannot be
kept, CMD's whole tree is stopped before its local safe deadline, by a watchdog
process that holds that deadline even if elect itself is stopped or killed. On
CMD's exit elect resigns and exits with CMD's status (124 if CMD had to be
stopped; see leasehold help exit-codes).

With --observe it campaigns for nothing: it prints the election's leader, then
each change (a new leader, a proclaimed value, nobody leading), one line each
with its log index, until interrupted.`,
		Args:              dashArgs("NAME", func() bool { return f.observe }),
		ValidArgsFunction: completeFirst(g, electionNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.observe {
				return observe(cmd, g, args[0], f.out.JSON())
			}
			if f.cgroup != "auto" && f.cgroup != "off" {
				return usagef("--cgroup %q: want auto or off", f.cgroup)
			}
			if !cmd.Flags().Changed("grace") {
				f.grace = defaultGrace(f.ttl)
			}
			return elect(cmd.Context(), g, f, args[0], args[1:])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.value, "value", "", "what this candidate announces while it leads (an address, say)")
	durationVar(fl, &f.ttl, "ttl", leasehold.DefaultTTL, "leadership lease time to live")
	durationVar(fl, &f.grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL when leadership cannot be kept (less for a --ttl under 8.5s)")
	fl.StringVar(&f.owner, "owner", defaultOwner(), "who campaigns (shown to operators)")
	fl.StringVar(&f.cgroup, "cgroup", "auto", "auto: the command's tree in its own cgroup v2 where one can be created; off: its process group")
	fl.BoolVar(&f.observe, "observe", false, "print the leader and each change of leader instead of campaigning")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "say once leading which watchdog process guards CMD and how (cgroup or process group)")
	f.out = addOutput(cmd) // with --observe, JSON is one object per line
	return cmd
}

// observe prints the leaders of the election name until interrupted.
func observe(cmd *cobra.Command, g *globals, name string, asJSON bool) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	o := c.Observe(cmd.Context(), name)
	w := cmd.OutOrStdout()
	for l := range o.Leaders() {
		if asJSON {
			e := cliout.FromElection(l.ElectionInfo)
			e.Index = l.Index
			if err := writeJSONLine(w, e); err != nil {
				return err
			}
			continue
		}
		if l.LeaseID == 0 {
			fmt.Fprintf(w, "%d\t%s\tno leader\n", l.Index, name)
			continue
		}
		fmt.Fprintf(w, "%d\t%s\tleader %q\ttoken %d\towner %s\n", l.Index, name, l.Value, l.Token, orDash(l.Owner))
	}
	return o.Err()
}

func elect(ctx context.Context, g *globals, f *electFlags, name string, argv []string) (err error) {
	res := cliout.RunResult{Election: name}
	if f.out.JSON() {
		defer func() { printRunResult(&res, err) }()
	}
	if f.grace < 0 || f.grace+killMargin >= f.ttl/2 {
		return usagef("--grace %v is too long for --ttl %v: SIGTERM must come well before leadership can lapse; use a grace under %v",
			f.grace, f.ttl, max(0, f.ttl/2-killMargin))
	}
	if _, err := lookCommand(argv[0]); err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	// Waiting to lead has no bound but the user's interrupt (a campaign
	// waits as long as a node keeps a waiter).
	l, err := inLine(ctx, g, waitFlag{forever: true}, func(ctx context.Context, _ time.Duration) (*client.Leadership, error) {
		return c.Campaign(ctx, name, f.value, client.TTL(f.ttl), client.Owner(f.owner))
	})
	if err != nil {
		return noLease(err)
	}
	res.LeaseID, res.Token = l.Lease().ID(), l.Token()
	return guarded(l.Lease(), guardedChild{
		name: "elect", what: fmt.Sprintf("leadership of %q", name), argv: argv,
		env: []string{
			"LEASEHOLD_TOKEN=" + strconv.FormatUint(l.Token(), 10),
			"LEASEHOLD_ELECTION=" + name,
			"LEASEHOLD_LEASE_ID=" + strconv.FormatUint(l.Lease().ID(), 10),
		},
		ttl: f.ttl, grace: f.grace, noCgroup: f.cgroup == "off", verbose: f.verbose,
	})
}

func newElections(g *globals) *cobra.Command {
	var out *output
	var prefix string
	cmd := &cobra.Command{
		Use:   "elections",
		Short: "Show every election: its leader's value, token and term start, and the candidates waiting",
		Long:  "Lists the elections that have a leader or candidates, by name. Needs the operator role.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			var es []client.ElectionInfo
			for e, err := range c.Elections(ctx, prefix) {
				if err != nil {
					return err
				}
				es = append(es, e)
			}
			w := cmd.OutOrStdout()
			if out.JSON() {
				return writeJSON(w, cliout.FromElections(es))
			}
			if len(es) == 0 {
				fmt.Fprintln(w, "no election has a leader or candidates")
				return nil
			}
			t := newTable(w, "ELECTION", "LEADER VALUE", "TOKEN", "OWNER", "SINCE", "CANDIDATES")
			for _, e := range es {
				token := ""
				if e.LeaseID != 0 {
					token = strconv.FormatUint(e.Token, 10)
				}
				t.row(e.Name, clip(e.Value, 40), token, e.Owner, stamp(e.Since, "2006-01-02 15:04:05"), e.Candidates)
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only elections starting with this")
	out = addOutput(cmd)
	return cmd
}
