package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A property test of partition groups: members join, leave and lapse,
// revocations are acknowledged or run out, and the group grows, in random
// order, with a snapshot and restore now and then. Every event is checked
// as it is applied, so the properties hold at every point, not only
// between commands:
//   - a partition has at most one owner (a revoking holder counts);
//   - its epochs strictly increase;
//   - once every revocation is acknowledged, every partition is owned and
//     the members' counts differ by at most one;
//   - a single join or leave among m members changes the target of at
//     most ⌈N/m⌉ + 1 partitions;
//   - every partition event names its member's session resource (what a
//     member's assignment stream selects it by);
//   - a restored snapshot writes the same bytes and goes on alike;
//   - a KV write fenced by one of a partition's epochs is accepted only
//     while that epoch is its owner's (fence.go).

// ownership follows the group's partitions through its events.
type ownership struct {
	timedObserver
	owner map[uint32]uint64 // partition -> session, while owned
	epoch map[uint32]uint64 // partition -> last epoch granted
	err   error
}

func newOwnership() *ownership {
	return &ownership{timedObserver: *newTimedObserver(), owner: map[uint32]uint64{}, epoch: map[uint32]uint64{}}
}

func (o *ownership) Event(e Event) {
	if o.err != nil || e.Group != "g" {
		return
	}
	p := e.Partition
	if e.Kind != EventGroupChanged && (len(e.Resources) != 1 || e.Resources[0] != GroupMemberResource("g", e.Owner)) {
		o.err = fmt.Errorf("index %d: %v of partition %d carries resources %q, not its member's session", e.Index, e.Kind, p, e.Resources)
	}
	switch e.Kind {
	case EventGroupAssigned:
		if cur, owned := o.owner[p]; owned {
			o.err = fmt.Errorf("index %d: partition %d granted to %d while %d owns it", e.Index, p, e.LeaseID, cur)
		} else if e.Token <= o.epoch[p] {
			o.err = fmt.Errorf("index %d: partition %d granted with epoch %d, not above %d", e.Index, p, e.Token, o.epoch[p])
		}
		o.owner[p], o.epoch[p] = e.LeaseID, e.Token
	case EventGroupRevoking, EventGroupRemoved:
		if cur, owned := o.owner[p]; !owned || cur != e.LeaseID || o.epoch[p] != e.Token {
			o.err = fmt.Errorf("index %d: %v of partition %d by %d (epoch %d); owner %d (epoch %d)", e.Index, e.Kind, p, e.LeaseID, e.Token, cur, o.epoch[p])
		}
		if e.Kind == EventGroupRemoved {
			delete(o.owner, p)
		}
	}
}

// targets are each partition's target member (next while revoking).
func targets(s *State) []string {
	d, _ := s.Group("g")
	out := make([]string, len(d.Partitions))
	for i, p := range d.Partitions {
		out[i] = p.Owner
		if p.Revoking {
			out[i] = p.NextOwner
		}
	}
	return out
}

func TestGroupProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		obs := newOwnership()
		s := New(DefaultConfig(), obs)
		var capt capturing
		defer capt.done(rt)
		ix, now := uint64(0), t0
		apply := func(c Command) Result {
			ix++
			now += int64(100 * time.Millisecond)
			r := s.Apply(ix, &Batch{Time: now, Cmds: []Command{c}})[0]
			if obs.err != nil {
				rt.Fatalf("after %T %+v: %v", c, c, obs.err)
			}
			return r
		}
		n0 := rapid.Uint32Range(1, 40).Draw(rt, "partitions")
		if r := apply(&GroupCreate{Group: "g", Partitions: n0}); r.Err != nil {
			rt.Fatal(r.Err)
		}
		epochs := map[uint32][]uint64{} // every epoch each partition had
		names := []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6"}
		alive := map[string]uint64{}
		pending := func() []GroupPartition {
			d, _ := s.Group("g")
			var out []GroupPartition
			for _, p := range d.Partitions {
				if p.Revoking {
					out = append(out, p)
				}
			}
			return out
		}
		// moved checks the move bound of one join or leave.
		moved := func(before []string, m int, what string) {
			after := targets(s)
			n, k := len(before), 0
			for p := range before {
				if before[p] != "" && before[p] != after[p] {
					k++
				}
			}
			if bound := (n+m-1)/m + 1; m > 0 && k > bound {
				rt.Fatalf("%s among %d members moved %d of %d partitions (bound %d): %q -> %q", what, m, k, n, bound, before, after)
			}
		}
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			switch rapid.IntRange(0, 7).Draw(rt, "op") {
			case 0, 1: // join
				name := rapid.SampledFrom(names).Draw(rt, "member")
				if _, ok := alive[name]; ok {
					continue
				}
				before := targets(s)
				r := apply(&GroupJoin{Group: "g", Member: name, TTL: 10 * time.Second, SecretHash: secret(name)})
				if r.Err != nil {
					rt.Fatalf("join %s: %v", name, r.Err)
				}
				alive[name] = r.Lease.ID
				moved(before, len(alive), "a join")
			case 2, 3: // leave, or the session lapses
				if len(alive) == 0 {
					continue
				}
				name := rapid.SampledFrom(sortedKeys(alive)).Draw(rt, "leaver")
				before, m := targets(s), len(alive)
				if rapid.Bool().Draw(rt, "lapse") {
					l, _ := s.Lease(alive[name])
					apply(&Expire{LeaseID: l.ID, RenewCount: l.RenewCount})
				} else if r := apply(&GroupLeave{LeaseID: alive[name], SecretHash: secret(name)}); r.Err != nil {
					rt.Fatalf("leave %s: %v", name, r.Err)
				}
				delete(alive, name)
				moved(before, m, "a leave")
			case 4: // a revocation is acknowledged
				ps := pending()
				if len(ps) == 0 {
					continue
				}
				p := rapid.SampledFrom(ps).Draw(rt, "ack")
				if r := apply(&GroupRevoked{Group: "g", Member: p.Owner, LeaseID: p.LeaseID, SecretHash: secret(p.Owner),
					Partition: p.Partition, Epoch: p.Epoch}); r.Err != nil {
					rt.Fatalf("ack %+v: %v", p, r.Err)
				}
			case 5: // a revocation runs out: its holder's session ends
				ps := pending()
				if len(ps) == 0 {
					continue
				}
				p := rapid.SampledFrom(ps).Draw(rt, "lapse")
				apply(&GroupLapse{Group: "g", LeaseID: p.LeaseID, Partition: p.Partition, Epoch: p.Epoch})
				if _, ok := s.Lease(p.LeaseID); ok {
					rt.Fatalf("the session of %s survived its lapsed revocation", p.Owner)
				}
				delete(alive, p.Owner)
			case 6: // growth
				d, _ := s.Group("g")
				if r := apply(&GroupGrow{Group: "g", Partitions: d.GroupInfo.Partitions + rapid.Uint32Range(1, 8).Draw(rt, "grow")}); r.Err != nil {
					rt.Fatal(r.Err)
				}
			case 7: // snapshot and restore
				snap := s.Snapshot()
				r, err := Restore(snap, DefaultConfig(), obs)
				if err != nil {
					rt.Fatal(err)
				}
				if !bytes.Equal(r.Snapshot(), snap) {
					rt.Fatal("a restored state writes other bytes")
				}
				s = r
				obs.reset(s)
			}
			obs.check(rt, s)
			capt.step(rt, s)
			// The state agrees with what the events said.
			d, _ := s.Group("g")
			for _, p := range d.Partitions {
				if cur := obs.owner[p.Partition]; cur != p.LeaseID {
					rt.Fatalf("partition %d: state says owner %d, events %d", p.Partition, p.LeaseID, cur)
				}
				if !slices.Contains(epochs[p.Partition], p.Epoch) {
					epochs[p.Partition] = append(epochs[p.Partition], p.Epoch)
				}
			}
			// A KV write fenced by any epoch the partition ever had lands
			// only while that epoch is its owner's: never after it moved.
			p := d.Partitions[rapid.IntRange(0, len(d.Partitions)-1).Draw(rt, "fenced partition")]
			e := rapid.SampledFrom(epochs[p.Partition]).Draw(rt, "fence epoch")
			r := apply(&Put{Key: "out", Value: []byte("v"), Fence: &leasehold.Fence{Group: "g", Partition: p.Partition, Token: e}})
			if current := p.LeaseID != 0 && p.Epoch == e; (r.Err == nil) != current {
				rt.Fatalf("a write fenced by epoch %d of partition %+v: %v (current: %v)", e, p, r.Err, current)
			}
		}
		// Stable: acknowledge every revocation; then all is owned, balanced.
		for ps := pending(); len(ps) > 0; ps = pending() {
			p := ps[0]
			if r := apply(&GroupRevoked{Group: "g", Member: p.Owner, LeaseID: p.LeaseID, SecretHash: secret(p.Owner),
				Partition: p.Partition, Epoch: p.Epoch}); r.Err != nil {
				rt.Fatalf("ack %+v: %v", p, r.Err)
			}
		}
		d, _ := s.Group("g")
		if len(alive) == 0 {
			return
		}
		counts := map[string]int{}
		for name := range alive {
			counts[name] = 0
		}
		for _, p := range d.Partitions {
			if p.Owner == "" {
				rt.Fatalf("partition %d has no owner with %d members and no revocation pending", p.Partition, len(alive))
			}
			counts[p.Owner]++
		}
		var cs []int
		for _, c := range counts {
			cs = append(cs, c)
		}
		if slices.Max(cs)-slices.Min(cs) > 1 {
			rt.Fatalf("unbalanced once stable: %v", counts)
		}
	})
}
