package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// TestReservedPrefixRefused: no caller takes, writes or fences a name
// under leasehold.ReservedPrefix, whichever way the call travels (a unary
// acquire, a batch, the session stream, a campaign, a KV write, a
// transaction, a fence): each is refused with invalid_argument naming the
// prefix, and nothing is granted. Inspecting such a name is allowed.
func TestReservedPrefixRefused(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	unary := newClient(t, client.Config{Session: client.SessionOff, MaxBatch: 1}, n.URL)
	batch := newClient(t, client.Config{Session: client.SessionOff}, n.URL)
	session := newClient(t, onStream(t, client.Config{}), n.URL)
	t.Cleanup(func() { session.Close() })
	name := leasehold.ReservedPrefix + "group/shards/worker-1"
	ctx := ctxFor(t, callTimeout)
	calls := map[string]func() error{
		"acquire": func() error { _, err := unary.Acquire(ctx, name, client.TTL(time.Second)); return err },
		"acquire many": func() error {
			_, err := unary.AcquireMany(ctx, []string{"ok/a", leasehold.ReservedPrefix + "x"}, client.TTL(time.Second))
			return err
		},
		"batch":   func() error { _, err := batch.Acquire(ctx, name, client.TTL(time.Second)); return err },
		"session": func() error { _, err := session.Acquire(ctx, name, client.TTL(time.Second)); return err },
		"campaign": func() error {
			_, err := unary.Campaign(ctx, leasehold.ReservedPrefix+"leader", "me", client.Wait(0))
			return err
		},
		"put": func() error { _, err := unary.Put(ctx, leasehold.ReservedPrefix+"k", []byte("v")); return err },
		"txn": func() error {
			_, err := unary.Txn(ctx).Then(client.OpPut(leasehold.ReservedPrefix+"k", []byte("v"))).Commit()
			return err
		},
		"check fence": func() error { return unary.CheckFence(ctx, name, 1) },
	}
	for what, call := range calls {
		err := call()
		if !errors.Is(err, leasehold.ErrInvalid) || !strings.Contains(err.Error(), leasehold.ReservedPrefix) {
			t.Errorf("%s under %q: %v; want invalid_argument naming the prefix", what, leasehold.ReservedPrefix, err)
		}
	}
	if ls, err := unary.Locks(ctx, client.LocksQuery{Prefix: leasehold.ReservedPrefix}); err != nil || len(ls) != 0 {
		t.Fatalf("locks under the prefix after the refusals: %+v, %v; want none", ls, err)
	}
	if r, err := unary.Get(ctx, name); err != nil || r.Holder != nil {
		t.Fatalf("status of %q: %+v, %v; want free", name, r, err)
	}
}
