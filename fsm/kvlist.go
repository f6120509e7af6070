package fsm

import (
	"slices"
	"strings"

	"github.com/leasehold/leasehold/api/leasehold"
)

// KeyItem is a key and what it holds, as Keys lists it (leasehold/kv.go).
type KeyItem = leasehold.KeyItem

// Keys lists up to limit keys starting with prefix and sorting after
// after ("": from the first), in key order, and whether more follow. It
// scans every key: the space is small (MaxKVBytes) and a page is rare.
func (s *State) Keys(prefix, after string, limit int) (items []KeyItem, more bool) {
	var keys []string
	for k := range s.kv.items.all() {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) > limit {
		keys, more = keys[:limit], true
	}
	items = make([]KeyItem, len(keys))
	for i, k := range keys {
		items[i] = KeyItem{Key: k, Item: s.kv.items.at(k)}
	}
	return items, more
}
