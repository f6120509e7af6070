package client_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// Txn runs the then branch when every compare holds and the else branch
// otherwise, reports each compare and each written key's version, and a
// misused OpPut option fails before anything is sent.
func TestTxnBranchesAndVersions(t *testing.T) {
	t.Parallel()
	c := nodeClient(t, startNode(t))
	ctx := ctxFor(t, 30*time.Second)
	v, err := c.Put(ctx, "t/a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Txn(ctx).If(client.VersionEquals("t/a", v), client.Absent("t/b"), client.ValueEquals("t/a", []byte("1"))).
		Then(client.OpPut("t/b", []byte("2")), client.OpDelete("t/a")).
		Else(client.OpPut("t/else", nil)).Commit()
	if err != nil {
		t.Fatal(err)
	}
	want := []client.KeyVersion{{Key: "t/b", Version: res.Index}, {Key: "t/a", Version: 0}}
	if !res.Succeeded || !slices.Equal(res.Compares, []bool{true, true, true}) || !slices.Equal(res.Writes, want) || res.Index <= v {
		t.Fatalf("then branch: %+v, want succeeded with writes %v", res, want)
	}
	res2, err := c.Txn(ctx).If(client.Exists("t/a"), client.VersionGreater("t/b", 0), client.VersionLess("t/b", res.Index)).
		Then(client.OpPut("t/then", nil)).
		Else(client.OpPut("t/else", []byte("e"))).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if res2.Succeeded || !slices.Equal(res2.Compares, []bool{false, true, false}) || len(res2.Writes) != 1 || res2.Writes[0].Key != "t/else" {
		t.Fatalf("else branch: %+v, want the else write and compares [false true false]", res2)
	}
	if _, _, err := c.GetKey(ctx, "t/then"); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("t/then after the else branch: %v, want not found", err)
	}
	_, err = c.Txn(ctx).Then(client.OpPut("t/x", nil, client.IfVersion(3))).Commit()
	if !errors.Is(err, leasehold.ErrInvalid) {
		t.Fatalf("OpPut with IfVersion: %v, want ErrInvalid", err)
	}
}
