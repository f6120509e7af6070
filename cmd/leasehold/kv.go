package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// The KV commands: kv put, get, delete, list and txn, and check-fence.

func newKV(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "kv", Short: "Read and write versioned keys (compare-and-swap, fencing, transactions)"}
	cmd.AddCommand(newKVPut(g), newKVGet(g), newKVDelete(g), newKVList(g), newKVTxn(g))
	return cmd
}

// writeFlags are the conditions of a single write.
type writeFlags struct {
	ifVersion  uint64
	fence      fenceTarget
	fenceToken uint64
}

func (f *writeFlags) add(g *globals, cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.Uint64Var(&f.ifVersion, "if-version", 0, "write only if the key is at this version (0: only if it does not exist)")
	fl.StringVar(&f.fence.resource, "fence", "", "write only while --token holds this resource (a fenced write)")
	fl.StringVar(&f.fence.group, "fence-group", "", "write only while --token is the epoch of --fence-partition of this group")
	fl.Uint32Var(&f.fence.partition, "fence-partition", 0, "the partition of --fence-group")
	fl.StringVar(&f.fence.queue, "fence-queue", "", "write only while --token is the delivery of --fence-key of this queue in flight")
	fl.StringVar(&f.fence.key, "fence-key", "", "the key of --fence-queue")
	fl.Uint64Var(&f.fenceToken, "token", 0, "the fencing token for --fence, --fence-group or --fence-queue (such as $LEASEHOLD_TOKEN)")
	completeFlag(g, cmd, "fence", resourceNames)
	completeFlag(g, cmd, "fence-group", groupNames)
	completeFlag(g, cmd, "fence-queue", queueNames)
}

func (f *writeFlags) options(cmd *cobra.Command) ([]client.WriteOption, error) {
	var opts []client.WriteOption
	if cmd.Flags().Changed("if-version") {
		opts = append(opts, client.IfVersion(f.ifVersion))
	}
	named, err := f.fence.check(func(s string) string { return "--fence-" + s }, cmd.Flags().Changed("fence-partition"))
	if err != nil {
		return nil, err
	}
	if named != (f.fenceToken != 0) {
		return nil, usagef("--fence RESOURCE (or --fence-group, --fence-queue) and --token N go together")
	}
	if named {
		opts = append(opts, f.fence.option(f.fenceToken))
	}
	return opts, nil
}

func newKVPut(g *globals) *cobra.Command {
	var wf writeFlags
	var out *output
	cmd := &cobra.Command{
		Use:               "put KEY [VALUE]",
		Short:             "Write VALUE (or stdin) at KEY and print its new version",
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeFirst(g, keyNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := wf.options(cmd)
			if err != nil {
				return err
			}
			var value []byte
			if len(args) == 2 {
				value = []byte(args[1])
			} else if value, err = io.ReadAll(cmd.InOrStdin()); err != nil {
				return err
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			v, err := c.Put(ctx, args[0], value, opts...)
			if err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), cliout.KeyWritten{Key: args[0], Version: v}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s: version %d\n", args[0], v)
				return err
			})
		},
	}
	wf.add(g, cmd)
	out = addOutput(cmd)
	return cmd
}

func keyValue(key string, k client.KeyInfo) cliout.KeyValue {
	kv := cliout.KeyValue{Key: key, Version: k.Version, LeaseID: k.LeaseID}
	kv.Value, kv.ValueBase64 = cliout.Value(k.Value)
	return kv
}

// valueText shows a value in a table: text as it is, other bytes by size.
func valueText(b []byte, n int) string {
	if !utf8.Valid(b) {
		return "(" + plural(len(b), "byte", "") + ")"
	}
	return clip(string(bytes.ReplaceAll(b, []byte("\n"), []byte(`\n`))), n)
}

func newKVGet(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:               "get KEY",
		Short:             "Print KEY's value (-o wide: with its version and lease)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, keyNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			k, err := c.GetKeyInfo(ctx, args[0])
			if err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), keyValue(args[0], k), func(w io.Writer) error {
				if out.Wide() {
					t := newTable(w, "KEY", "VERSION", "LEASE", "VALUE")
					t.row(args[0], k.Version, leaseCell(k.LeaseID), valueText(k.Value, 80))
					return t.flush()
				}
				_, err := w.Write(k.Value)
				if err == nil && len(k.Value) > 0 && k.Value[len(k.Value)-1] != '\n' && utf8.Valid(k.Value) {
					_, err = fmt.Fprintln(w)
				}
				return err
			})
		},
	}
	out = addOutput(cmd)
	return cmd
}

func leaseCell(id uint64) string {
	if id == 0 {
		return ""
	}
	return fmt.Sprint(id)
}

func newKVDelete(g *globals) *cobra.Command {
	var wf writeFlags
	var out *output
	cmd := &cobra.Command{
		Use:               "delete KEY",
		Short:             "Delete KEY",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(g, keyNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := wf.options(cmd)
			if err != nil {
				return err
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.Delete(ctx, args[0], opts...); err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), cliout.KeyWritten{Key: args[0], Deleted: true}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "deleted %s\n", args[0])
				return err
			})
		},
	}
	wf.add(g, cmd)
	out = addOutput(cmd)
	return cmd
}

func newKVList(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "list [PREFIX]",
		Short: "List the keys starting with PREFIX, with their versions, leases and values",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			var all []client.KeyEntry
			for k, err := range c.Keys(ctx, prefix) {
				if err != nil {
					return err
				}
				all = append(all, k)
			}
			list := cliout.KeyValues{Keys: []cliout.KeyValue{}}
			for _, k := range all {
				list.Keys = append(list.Keys, keyValue(k.Key, k.KeyInfo))
			}
			return out.print(cmd.OutOrStdout(), list, func(w io.Writer) error {
				width := 40
				if out.Wide() {
					width = 200
				}
				t := newTable(w, "KEY", "VERSION", "LEASE", "VALUE")
				for _, k := range all {
					t.row(k.Key, k.Version, leaseCell(k.LeaseID), valueText(k.Value, width))
				}
				return t.flush()
			})
		},
	}
	out = addOutput(cmd)
	return cmd
}

// txnSpec is kv txn's input (docs/cli-json.md, "kv txn input").
type txnSpec struct {
	If    []txnCompare `json:"if"`
	Then  []txnOp      `json:"then"`
	Else  []txnOp      `json:"else"`
	Fence *struct {
		Resource  string  `json:"resource"`
		Group     string  `json:"group"`
		Partition *uint32 `json:"partition"`
		Queue     string  `json:"queue"`
		Key       string  `json:"key"`
		Token     uint64  `json:"token"`
	} `json:"fence"`
}

// txnCompare is one condition on a key: exactly one of the others.
type txnCompare struct {
	Key            string  `json:"key"`
	Version        *uint64 `json:"version"`
	VersionGreater *uint64 `json:"version_greater"`
	VersionLess    *uint64 `json:"version_less"`
	Value          *string `json:"value"`
	Exists         *bool   `json:"exists"`
}

// txnOp is one write: put KEY with value, or delete KEY.
type txnOp struct {
	Put    string  `json:"put"`
	Value  *string `json:"value"`
	Delete string  `json:"delete"`
}

func (c txnCompare) cmp(i int) (client.Cmp, error) {
	var out []client.Cmp
	if c.Version != nil {
		out = append(out, client.VersionEquals(c.Key, *c.Version))
	}
	if c.VersionGreater != nil {
		out = append(out, client.VersionGreater(c.Key, *c.VersionGreater))
	}
	if c.VersionLess != nil {
		out = append(out, client.VersionLess(c.Key, *c.VersionLess))
	}
	if c.Value != nil {
		out = append(out, client.ValueEquals(c.Key, []byte(*c.Value)))
	}
	if c.Exists != nil {
		if *c.Exists {
			out = append(out, client.Exists(c.Key))
		} else {
			out = append(out, client.Absent(c.Key))
		}
	}
	if c.Key == "" || len(out) != 1 {
		return client.Cmp{}, usagef(`kv txn: "if"[%d] needs "key" and exactly one of "version", "version_greater", "version_less", "value", "exists"`, i)
	}
	return out[0], nil
}

func (o txnOp) op(branch string, i int) (client.Op, error) {
	switch {
	case o.Put != "" && o.Delete == "" && o.Value != nil:
		return client.OpPut(o.Put, []byte(*o.Value)), nil
	case o.Delete != "" && o.Put == "" && o.Value == nil:
		return client.OpDelete(o.Delete), nil
	}
	return client.Op{}, usagef(`kv txn: %q[%d] must be {"put": KEY, "value": TEXT} or {"delete": KEY}`, branch, i)
}

// parseTxn reads a transaction's JSON, refusing unknown fields.
func parseTxn(r io.Reader) (*txnSpec, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var s txnSpec
	if err := dec.Decode(&s); err != nil {
		return nil, usagef("kv txn: the transaction is not valid JSON of the documented form (leasehold kv txn --help): %v", err)
	}
	return &s, nil
}

func newKVTxn(g *globals) *cobra.Command {
	var file string
	var out *output
	cmd := &cobra.Command{
		Use:   "txn [-f FILE]",
		Short: "Apply a transaction given as JSON (stdin, or -f FILE): compares, then writes, in one step",
		Long: `Reads one transaction as JSON and applies it in one log entry: if every
compare in "if" holds, the "then" writes run, otherwise the "else" writes.
Optionally fenced: nothing runs unless the token still holds the resource
("fence": {"group": G, "partition": P, "token": EPOCH} or {"queue": Q, "key": K,
"token": DELIVERY_TOKEN} fence with a partition's epoch or a delivery's token).

  {"if":   [{"key": "jobs/7/owner", "exists": false}],
   "then": [{"put": "jobs/7/owner", "value": "w1"}, {"put": "jobs/7/state", "value": "claimed"}],
   "else": [],
   "fence": {"resource": "jobs", "token": 42}}

A compare is "key" and one of: "version" (equals; 0: absent), "version_greater",
"version_less", "value" (equals, text), "exists" (true or false). A write is
{"put": KEY, "value": TEXT} or {"delete": KEY}. Exit 0 whichever branch ran
("succeeded" says which); a refused transaction wrote nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := cmd.InOrStdin()
			if file != "" && file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			spec, err := parseTxn(in)
			if err != nil {
				return err
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			txn := c.Txn(ctx)
			for i, cmp := range spec.If {
				c, err := cmp.cmp(i)
				if err != nil {
					return err
				}
				txn.If(c)
			}
			for _, b := range []struct {
				name string
				ops  []txnOp
				add  func(...client.Op) *client.Txn
			}{{"then", spec.Then, txn.Then}, {"else", spec.Else, txn.Else}} {
				for i, o := range b.ops {
					op, err := o.op(b.name, i)
					if err != nil {
						return err
					}
					b.add(op)
				}
			}
			if f := spec.Fence; f != nil {
				target := fenceTarget{resource: f.Resource, group: f.Group, queue: f.Queue, key: f.Key}
				if f.Partition != nil {
					target.partition = *f.Partition
				}
				if _, err := target.check(func(s string) string { return "fence." + s }, f.Partition != nil); err != nil {
					return err
				}
				switch {
				case f.Group != "":
					txn.FencedByPartition(f.Group, int(target.partition), f.Token)
				case f.Queue != "":
					txn.FencedByDelivery(f.Queue, f.Key, f.Token)
				default:
					txn.Fence(f.Resource, f.Token)
				}
			}
			res, err := txn.Commit()
			if err != nil {
				return err
			}
			r := cliout.TxnResult{Succeeded: res.Succeeded, Compares: res.Compares, Writes: []cliout.KeyWritten{}, Index: res.Index}
			if r.Compares == nil {
				r.Compares = []bool{}
			}
			for _, w := range res.Writes {
				r.Writes = append(r.Writes, cliout.KeyWritten{Key: w.Key, Version: w.Version, Deleted: w.Version == 0})
			}
			return out.print(cmd.OutOrStdout(), r, func(w io.Writer) error {
				branch := "then"
				if !r.Succeeded {
					branch = "else"
				}
				fmt.Fprintf(w, "compares %v: the %q branch ran at index %d\n", r.Compares, branch, r.Index)
				t := newTable(w, "KEY", "VERSION")
				for _, kw := range r.Writes {
					t.row(kw.Key, kw.Version)
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "read the transaction from FILE (default: stdin)")
	out = addOutput(cmd)
	return cmd
}

func newCheckFence(g *globals) *cobra.Command {
	var out *output
	var target fenceTarget
	cmd := &cobra.Command{
		Use:               "check-fence {RESOURCE | --group G --partition P | --queue Q --key K} TOKEN",
		Short:             "Say whether a write fenced with TOKEN on RESOURCE (or a partition, or a queue key) would be accepted now",
		ValidArgsFunction: completeFirst(g, resourceNames),
		Long: "Asks what a fence (the guards, a fenced KV write) would say for TOKEN on RESOURCE:\n" +
			"current (exit 0) while TOKEN belongs to the lease holding RESOURCE, else stale (exit 5).\n" +
			"With --group and --partition, TOKEN is a partition's epoch: current while its owner has it\n" +
			"(also while it is being revoked). With --queue and --key, TOKEN is a delivery's token:\n" +
			"current while that delivery of the key is in flight.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			byFlags := target.group != "" || target.queue != ""
			if want := map[bool]int{true: 1, false: 2}[byFlags]; len(args) != want {
				return usagef("check-fence takes RESOURCE TOKEN, or TOKEN after --group/--partition or --queue/--key")
			}
			if !byFlags {
				target.resource = args[0]
			}
			if _, err := target.check(func(s string) string { return "--" + s }, cmd.Flags().Changed("partition")); err != nil {
				return err
			}
			tokenArg := args[len(args)-1]
			var token uint64
			if _, err := fmt.Sscan(tokenArg, &token); err != nil || token == 0 {
				return usagef("TOKEN %q: want a fencing token, a positive number", tokenArg)
			}
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			err = target.checkFence(ctx, c, token)
			if err != nil && !errors.Is(err, leasehold.ErrStaleToken) {
				return err
			}
			fc := cliout.FenceCheck{Resource: target.resource, Group: target.group, Queue: target.queue, Key: target.key,
				Token: token, Current: err == nil}
			if target.group != "" {
				fc.Partition = &target.partition
			}
			if err != nil {
				fc.Reason = err.Error()
			}
			perr := out.print(cmd.OutOrStdout(), fc, func(w io.Writer) error {
				if fc.Current {
					_, err := fmt.Fprintf(w, "token %d is current for %s: a fenced write would be accepted\n", token, target)
					return err
				}
				_, err := fmt.Fprintf(w, "token %d is stale for %s: a fenced write would be refused (%s)\n", token, target, fc.Reason)
				return err
			})
			if perr != nil {
				return perr
			}
			if err != nil {
				return exitError{code: exitCode(err)} // said above
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&target.group, "group", "", "check a partition's epoch: the group")
	fl.Uint32Var(&target.partition, "partition", 0, "the partition of --group")
	fl.StringVar(&target.queue, "queue", "", "check a delivery's token: the queue")
	fl.StringVar(&target.key, "key", "", "the key of --queue")
	completeFlag(g, cmd, "group", groupNames)
	completeFlag(g, cmd, "queue", queueNames)
	out = addOutput(cmd)
	return cmd
}
