package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Dynamic shell completion (leasehold completion bash|zsh|fish|powershell):
// resource names of held leases from the List API, and KV keys, for the
// first argument of the commands that take one. Cheap: one paged read,
// bounded to completeTimeout and completeMax names.

const (
	completeTimeout = 2 * time.Second
	completeMax     = 1000
)

// completeResources completes a held resource's name.
func completeResources(g *globals) cobra.CompletionFunc {
	return completeFirst(g, func(ctx context.Context, g *globals, prefix string) []string {
		c, err := g.client()
		if err != nil {
			return nil
		}
		defer c.Close()
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
	})
}

// completeKeys completes a KV key.
func completeKeys(g *globals) cobra.CompletionFunc {
	return completeFirst(g, func(ctx context.Context, g *globals, prefix string) []string {
		c, err := g.client()
		if err != nil {
			return nil
		}
		defer c.Close()
		var keys []string
		for k, err := range c.Keys(ctx, prefix) {
			if err != nil || len(keys) >= completeMax {
				break
			}
			keys = append(keys, k.Key)
		}
		return keys
	})
}

func completeFirst(g *globals, names func(context.Context, *globals, string) []string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
		defer cancel()
		out := names(ctx, g, toComplete)
		slices.Sort(out)
		return slices.Compact(out), cobra.ShellCompDirectiveNoFileComp
	}
}
