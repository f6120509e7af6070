package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/client"
)

type electFlags struct {
	value, owner    string
	ttl, grace      time.Duration
	cgroup          string
	observe, asJSON bool
}

func newElect(g *globals) *cobra.Command {
	f := &electFlags{}
	cmd := &cobra.Command{
		Use:   "elect NAME [flags] -- CMD [ARGS...] | elect NAME --observe [--json]",
		Short: "Run a command only while leading the election NAME",
		Long: `Campaigns in the election NAME (candidates lead in arrival order) and, once
leading, runs CMD with LEASEHOLD_TOKEN (the term's fencing token),
LEASEHOLD_ELECTION and LEASEHOLD_LEASE_ID in its environment. Leadership is a
lease and CMD is kept exactly as by "leasehold run": if leadership cannot be
kept, CMD's whole tree is stopped before its local safe deadline, by a watchdog
process that holds that deadline even if elect itself is stopped or killed. On
CMD's exit elect resigns and exits with CMD's status (75 if CMD had to be
stopped).

With --observe it campaigns for nothing: it prints the election's leader, then
each change (a new leader, a proclaimed value, nobody leading), one line each
with its log index, until interrupted.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.observe {
				if len(args) != 1 {
					return errors.New("usage: leasehold elect NAME --observe [--json] (no command)")
				}
				return observe(cmd, g, args[0], f.asJSON)
			}
			if len(args) < 2 || cmd.ArgsLenAtDash() != 1 {
				return errors.New("usage: leasehold elect NAME [flags] -- CMD [ARGS...]")
			}
			if f.cgroup != "auto" && f.cgroup != "off" {
				return fmt.Errorf("--cgroup %q: want auto or off", f.cgroup)
			}
			if !cmd.Flags().Changed("grace") {
				f.grace = defaultGrace(f.ttl)
			}
			return elect(cmd.Context(), g, f, args[0], args[1:])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.value, "value", "", "what this candidate announces while it leads (an address, say)")
	fl.DurationVar(&f.ttl, "ttl", 15*time.Second, "leadership lease time to live")
	fl.DurationVar(&f.grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL when leadership cannot be kept (less for a --ttl under 8.5s)")
	fl.StringVar(&f.owner, "owner", defaultOwner(), "who campaigns (shown to operators)")
	fl.StringVar(&f.cgroup, "cgroup", "auto", "auto: the command's tree in its own cgroup v2 where one can be created; off: its process group")
	fl.BoolVar(&f.observe, "observe", false, "print the leader and each change of leader instead of campaigning")
	fl.BoolVar(&f.asJSON, "json", false, "with --observe: print one JSON object per line")
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
	enc := json.NewEncoder(w)
	for l := range o.Leaders() {
		if asJSON {
			out := struct {
				Index uint64 `json:"index"`
				electionJSON
			}{l.Index, electionWire(l.ElectionInfo)}
			if err := enc.Encode(out); err != nil {
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

func elect(ctx context.Context, g *globals, f *electFlags, name string, argv []string) error {
	if f.grace < 0 || f.grace+killMargin >= f.ttl/2 {
		return fmt.Errorf("--grace %v is too long for --ttl %v: SIGTERM must come well before leadership can lapse; use a grace under %v",
			f.grace, f.ttl, max(0, f.ttl/2-killMargin))
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	// Waiting to lead has no bound but the user's interrupt.
	var l *client.Leadership
	for {
		l, err = c.Campaign(ctx, name, f.value, client.TTL(f.ttl), client.Owner(f.owner))
		if ctx.Err() == nil && errors.Is(err, leasehold.ErrWaitTimeout) {
			continue // an hour in line without leading: campaign again
		}
		break
	}
	if err != nil {
		return err
	}
	return guarded(l.Lease(), guardedChild{
		name: "elect", what: fmt.Sprintf("leadership of %q", name), argv: argv,
		env: []string{
			"LEASEHOLD_TOKEN=" + strconv.FormatUint(l.Token(), 10),
			"LEASEHOLD_ELECTION=" + name,
			"LEASEHOLD_LEASE_ID=" + strconv.FormatUint(l.Lease().ID(), 10),
		},
		ttl: f.ttl, grace: f.grace, noCgroup: f.cgroup == "off",
	})
}

func newElections(g *globals) *cobra.Command {
	var asJSON bool
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
			es, err := c.Elections(ctx, prefix)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				for _, e := range es {
					if err := enc.Encode(electionWire(e)); err != nil {
						return err
					}
				}
				return nil
			}
			if len(es) == 0 {
				fmt.Fprintln(w, "no election has a leader or candidates")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ELECTION\tLEADER VALUE\tTOKEN\tOWNER\tSINCE\tCANDIDATES")
			for _, e := range es {
				token := "-"
				if e.LeaseID != 0 {
					token = strconv.FormatUint(e.Token, 10)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", e.Name, orDash(clip(e.Value, 40)), token, orDash(e.Owner),
					stamp(e.Since, "2006-01-02 15:04:05"), e.Candidates)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only elections starting with this")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per election")
	return cmd
}

// electionJSON is an election as --json prints it.
type electionJSON struct {
	Name       string `json:"name"`
	Leading    bool   `json:"leading"`
	Value      string `json:"value,omitempty"`
	Token      uint64 `json:"token,omitempty"`
	LeaseID    uint64 `json:"lease_id,omitempty"`
	Owner      string `json:"owner,omitempty"`
	Since      string `json:"since,omitempty"`
	Candidates int    `json:"candidates"`
}

func electionWire(e client.ElectionInfo) electionJSON {
	out := electionJSON{Name: e.Name, Leading: e.LeaseID != 0, Value: e.Value, Token: e.Token, LeaseID: e.LeaseID,
		Owner: e.Owner, Candidates: e.Candidates}
	if !e.Since.IsZero() {
		out.Since = e.Since.UTC().Format(time.RFC3339Nano)
	}
	return out
}
