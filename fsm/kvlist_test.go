package fsm

import (
	"fmt"
	"slices"
	"testing"
)

// Keys pages through a prefix in key order, each key once, with its
// version and bound lease.
func TestKeysPagesAPrefixInOrder(t *testing.T) {
	s := New(DefaultConfig(), nil)
	for i, k := range []string{"b/3", "a/1", "b/1", "c", "b/2", "b"} {
		s.kv.setItem(k, Item{Version: uint64(i + 1), Lease: uint64(10 * i)})
	}
	var got []string
	after := ""
	for page := 0; ; page++ {
		items, more := s.Keys("b/", after, 2)
		for _, it := range items {
			if want := s.kv.items.at(it.Key); it.Version != want.Version || it.Lease != want.Lease {
				t.Errorf("%s: %+v, want %+v", it.Key, it.Item, want)
			}
			got = append(got, it.Key)
			after = it.Key
		}
		if !more {
			break
		}
		if page > 3 {
			t.Fatal("Keys never says the last page")
		}
	}
	if want := []string{"b/1", "b/2", "b/3"}; !slices.Equal(got, want) {
		t.Fatalf("pages of b/: %v, want %v", got, want)
	}
	if items, more := s.Keys("", "", 100); len(items) != 6 || more {
		t.Fatalf("all keys: %d (more %v), want 6", len(items), more)
	}
	if items, _ := s.Keys("zz", "", 10); len(items) != 0 {
		t.Fatalf("an unused prefix lists %v", fmt.Sprint(items))
	}
}
