package client

import (
	"context"
	"iter"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Leases yields every held lease on a resource starting with prefix ("":
// all), reading a page of up to 1000 at a time as the loop goes. A failed
// read is yielded as the error of a last pair, after which it stops:
//
//	for l, err := range c.Leases(ctx, "jobs/") {
//		if err != nil {
//			return err
//		}
//		fmt.Println(l.ID, l.Resources)
//	}
//
// Leases granted or ended while the loop runs may or may not be seen;
// none is seen twice. List reads one page.
func (c *Client) Leases(ctx context.Context, prefix string) iter.Seq2[LeaseInfo, error] {
	return pages(func(token string) ([]LeaseInfo, string, error) {
		p, err := c.List(ctx, prefix, leasehold.MaxListLimit, token)
		return p.Leases, p.NextPageToken, err
	})
}

// Elections yields every election with a leader or candidates whose name
// starts with prefix ("": all), by name, reading a page of up to 1000 at a
// time as the loop goes; a failed read is yielded last, as in Leases.
// ListElections reads one page.
func (c *Client) Elections(ctx context.Context, prefix string) iter.Seq2[ElectionInfo, error] {
	return pages(func(token string) ([]ElectionInfo, string, error) {
		p, err := c.ListElections(ctx, prefix, leasehold.MaxListLimit, token)
		return p.Elections, p.NextPageToken, err
	})
}

// pages yields the items of the pages that fetch returns, from the first
// (token "") until a page has no next token, yield stops, or fetch fails
// (yielded last, with a zero item).
func pages[T any](fetch func(token string) (items []T, next string, err error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		token := ""
		for {
			items, next, err := fetch(token)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			token = next
		}
	}
}
