package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// TestElectionsPages: ListElections reads one page at a time, by name,
// with a token for the next; Elections yields every election under the
// prefix once, in name order, and none outside it.
func TestElectionsPages(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	const count = 12
	for i := range count {
		l, err := c.Campaign(ctxFor(t, callTimeout), fmt.Sprintf("ep/in/%02d", i), "v", client.TTL(time.Minute), client.ManualRenew())
		if err != nil {
			t.Fatalf("campaign %d: %v", i, err)
		}
		t.Cleanup(func() { l.Resign(ctxFor(t, callTimeout)) })
	}
	out, err := c.Campaign(ctxFor(t, callTimeout), "ep/out", "v", client.TTL(time.Minute), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Resign(ctxFor(t, callTimeout)) })

	ctx := ctxFor(t, callTimeout)
	var sizes []int
	token := ""
	for range count {
		p, err := c.ListElections(ctx, "ep/in/", 5, token)
		if err != nil {
			t.Fatalf("page after %q: %v", token, err)
		}
		sizes = append(sizes, len(p.Elections))
		if token = p.NextPageToken; token == "" {
			break
		}
	}
	if fmt.Sprint(sizes) != "[5 5 2]" {
		t.Fatalf("page sizes %v, want [5 5 2]", sizes)
	}

	i := 0
	for e, err := range c.Elections(ctx, "ep/in/") {
		if err != nil {
			t.Fatalf("Elections after %d: %v", i, err)
		}
		if want := fmt.Sprintf("ep/in/%02d", i); e.Name != want || e.Value != "v" || e.LeaseID == 0 {
			t.Fatalf("election %d: %+v, want %s led with value v", i, e, want)
		}
		i++
	}
	if i != count {
		t.Fatalf("Elections yielded %d, want %d", i, count)
	}
}
