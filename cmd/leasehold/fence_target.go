package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/leasehold/leasehold/client"
)

// fenceTarget is what a fencing token fences, from flags: a resource, a
// partition of a group (its epoch) or a key of a queue (its delivery's
// token). Exactly one, or none.
type fenceTarget struct {
	resource  string
	group     string
	partition uint32
	queue     string
	key       string
}

// check refuses a half-named or doubly-named target; flag names the
// flags in messages (--fence-group or --group, ...). named reports
// whether any target was named; partitionSet whether --partition was given.
func (f fenceTarget) check(flag func(string) string, partitionSet bool) (named bool, err error) {
	n := 0
	for _, v := range []string{f.resource, f.group, f.queue} {
		if v != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return false, usagef("name one thing the token fences: a resource, %s, or %s", flag("group"), flag("queue"))
	case f.group != "" && !partitionSet:
		return false, usagef("%s G needs %s P", flag("group"), flag("partition"))
	case f.group == "" && partitionSet:
		return false, usagef("%s P needs %s G", flag("partition"), flag("group"))
	case f.queue != "" && f.key == "":
		return false, usagef("%s Q needs %s K", flag("queue"), flag("key"))
	case f.queue == "" && f.key != "":
		return false, usagef("%s K needs %s Q", flag("key"), flag("queue"))
	}
	return n == 1, nil
}

// option is the write option that fences with token.
func (f fenceTarget) option(token uint64) client.WriteOption {
	switch {
	case f.group != "":
		return client.FencedByPartition(f.group, int(f.partition), token)
	case f.queue != "":
		return client.FencedByDelivery(f.queue, f.key, token)
	}
	return client.Fence(f.resource, token)
}

// checkFence asks the cluster whether token is current for the target.
func (f fenceTarget) checkFence(ctx context.Context, c *client.Client, token uint64) error {
	switch {
	case f.group != "":
		return c.CheckPartitionFence(ctx, f.group, int(f.partition), token)
	case f.queue != "":
		return c.CheckDeliveryFence(ctx, f.queue, f.key, token)
	}
	return c.CheckFence(ctx, f.resource, token)
}

// String names the target for people: the resource as given, or
// `partition 3 of group "g"`, `key "k" of queue "q"`.
func (f fenceTarget) String() string {
	switch {
	case f.group != "":
		return fmt.Sprintf("partition %d of group %s", f.partition, strconv.Quote(f.group))
	case f.queue != "":
		return fmt.Sprintf("key %s of queue %s", strconv.Quote(f.key), strconv.Quote(f.queue))
	}
	return f.resource
}
