package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/client"
)

// Dynamic shell completion (leasehold completion bash|zsh|fish|powershell)
// of the names a command's first argument (or a flag) takes: resources of
// held leases, KV keys, queues, groups and elections, from the List APIs.
// Cheap: one paged read, bounded to completeTimeout and completeMax names.

const (
	completeTimeout = 2 * time.Second
	completeMax     = 1000
)

// namesFunc lists the names under prefix that c knows of, at most
// completeMax of them.
type namesFunc func(ctx context.Context, c *client.Client, prefix string) []string

func resourceNames(ctx context.Context, c *client.Client, prefix string) []string {
	var names []string
	for l, err := range c.Leases(ctx, prefix) {
		if err != nil || len(names) >= completeMax {
			break
		}
		for _, r := range l.Resources {
			if strings.HasPrefix(r, prefix) {
				names = append(names, r)
			}
		}
	}
	return names
}

func keyNames(ctx context.Context, c *client.Client, prefix string) []string {
	var keys []string
	for k, err := range c.Keys(ctx, prefix) {
		if err != nil || len(keys) >= completeMax {
			break
		}
		keys = append(keys, k.Key)
	}
	return keys
}

// namesOf is the name of each of items.
func namesOf[T any](items []T, name func(T) string) []string {
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = name(it)
	}
	return names
}

func queueNames(ctx context.Context, c *client.Client, prefix string) []string {
	qs, _ := c.Queues(ctx, prefix)
	return namesOf(qs, func(q client.QueueInfo) string { return q.Name })
}

func groupNames(ctx context.Context, c *client.Client, prefix string) []string {
	gs, _ := c.Groups(ctx, prefix)
	return namesOf(gs, func(g client.GroupInfo) string { return g.Name })
}

func idemNames(ctx context.Context, c *client.Client, prefix string) []string {
	recs, _ := c.IdemList(ctx, prefix, "", completeMax)
	return namesOf(recs, func(r client.IdemInfo) string { return r.Key })
}

func electionNames(ctx context.Context, c *client.Client, prefix string) []string {
	var names []string
	for e, err := range c.Elections(ctx, prefix) {
		if err != nil || len(names) >= completeMax {
			break
		}
		names = append(names, e.Name)
	}
	return names
}

// completeFirst completes a command's first argument with names.
func completeFirst(g *globals, names namesFunc) cobra.CompletionFunc {
	complete := completeNames(g, names)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return complete(cmd, args, toComplete)
	}
}

// completeFlag completes the value of cmd's flag with names.
func completeFlag(g *globals, cmd *cobra.Command, flag string, names namesFunc) {
	cmd.RegisterFlagCompletionFunc(flag, completeNames(g, names))
}

// completeNames asks the cluster (as --endpoints and the token say) for
// the names that start with what is typed; none if it cannot be asked.
func completeNames(g *globals, names namesFunc) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		c, err := g.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
		defer cancel()
		out := names(ctx, c, toComplete)
		slices.Sort(out)
		return slices.Compact(out), cobra.ShellCompDirectiveNoFileComp
	}
}
