package main_test

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// kv put --fence-queue/--fence-key and check-fence --queue/--key accept a
// delivery's token while it is in flight and refuse it (exit 5) after the
// ack (kv txn's "fence" alike); kv put --fence-group/--fence-partition, run by a `groups run`
// child with its LEASEHOLD_TOKEN, is accepted while the member owns the
// partition and refused after it left. Half-named targets are usage
// errors (exit 2).
func TestFencedKVByDeliveryAndPartition(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	n.lhOK("queue", "create", "f/q")
	n.lhOK("queue", "send", "f/q", "--key", "k", "--body", "b")
	var got cliout.Received
	if err := decodeStrict(n.lhOK("queue", "receive", "f/q", "--json").stdout, &got); err != nil || len(got.Deliveries) != 1 {
		t.Fatalf("receive: %+v %v", got, err)
	}
	d := got.Deliveries[0]
	tok := strconv.FormatUint(d.Token, 10)
	put := []string{"kv", "put", "f/out", "v", "--fence-queue", "f/q", "--fence-key", "k", "--token", tok}
	n.lhOK(put...)
	var fc cliout.FenceCheck
	if err := decodeStrict(n.lhOK("check-fence", "--queue", "f/q", "--key", "k", tok, "--json").stdout, &fc); err != nil ||
		!fc.Current || fc.Queue != "f/q" || fc.Key != "k" || fc.Token != d.Token || fc.Resource != "" || fc.Partition != nil {
		t.Fatalf("check-fence of the delivery in flight: %+v %v", fc, err)
	}
	txn := func(fence string) cliResult {
		return lhStdin(t, `{"then":[{"put":"f/txn","value":"x"}],"fence":`+fence+`}`, "kv", "txn", "--endpoints", n.url)
	}
	byDelivery := `{"queue":"f/q","key":"k","token":` + tok + `}`
	if r := txn(byDelivery); r.code != 0 {
		t.Fatalf("kv txn fenced by the delivery in flight: %s", r)
	}
	n.lhOK("queue", "ack", "f/q", "--sequence", strconv.FormatUint(d.Sequence, 10), "--token", tok)
	if r := txn(byDelivery); r.code != 5 {
		t.Fatalf("kv txn fenced by an acked delivery: %s, want exit 5", r)
	}
	if r := txn(`{"group":"f-g","token":1}`); r.code != 2 || !strings.Contains(r.stderr, "fence.group G needs fence.partition P") {
		t.Fatalf("kv txn fenced by a group without a partition: %s, want exit 2 naming partition", r)
	}
	if r := n.lh(put...); r.code != 5 || !strings.Contains(r.stderr, "stale") {
		t.Fatalf("kv put fenced by an acked delivery: %s, want exit 5, stale", r)
	}
	if r := n.lh("check-fence", "--queue", "f/q", "--key", "k", tok); r.code != 5 || !strings.Contains(r.stdout, `key "k" of queue "f/q"`) {
		t.Fatalf("check-fence of an acked delivery: %s, want exit 5", r)
	}

	n.lhOK("groups", "create", "f-g", "--partitions", "1")
	script := `"$LH" kv put --endpoints "$URL" f/epoch "$LEASEHOLD_TOKEN" --fence-group "$LEASEHOLD_GROUP" ` +
		`--fence-partition "$LEASEHOLD_PARTITION" --token "$LEASEHOLD_TOKEN" || exit 1; exec sleep 60`
	member := startProc(t, t.TempDir(), "member", childEnv("LH="+lhBin, "URL="+n.url), "groups", "--endpoints", n.url, "run", "f-g",
		"--member", "m", "--ttl", "10s", "--grace", "500ms", "--cgroup", "off", "--", "sh", "-c", script)
	var epoch string
	checkFor(t, 30*time.Second, func() error {
		if member.Exited() {
			t.Fatalf("groups run ended: %s", member.Stderr())
		}
		r := n.lh("kv", "get", "f/epoch", "--json")
		if r.code != 0 {
			return fmt.Errorf("f/epoch not written yet: %s", r)
		}
		var kv cliout.KeyValue
		if err := decodeStrict(r.stdout, &kv); err != nil || kv.Value == nil {
			t.Fatalf("kv get f/epoch: %+v %v", kv, err)
		}
		epoch = *kv.Value
		return nil
	})
	n.lhOK("check-fence", "--group", "f-g", "--partition", "0", epoch)
	if err := member.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !member.Wait(30 * time.Second) {
		t.Fatal("groups run did not end on SIGTERM")
	}
	if r := n.lh("kv", "put", "f/epoch", "late", "--fence-group", "f-g", "--fence-partition", "0", "--token", epoch); r.code != 5 {
		t.Fatalf("kv put fenced by the epoch of a member that left: %s, want exit 5", r)
	}
	if r := n.lh("check-fence", "--group", "f-g", "--partition", "0", epoch); r.code != 5 {
		t.Fatalf("check-fence of the epoch of a member that left: %s, want exit 5", r)
	}

	for _, args := range [][]string{
		{"kv", "put", "f/x", "v", "--fence-group", "f-g", "--token", "1"},
		{"kv", "put", "f/x", "v", "--fence-queue", "f/q", "--token", "1"},
		{"kv", "put", "f/x", "v", "--fence", "r", "--fence-queue", "f/q", "--fence-key", "k", "--token", "1"},
		{"kv", "put", "f/x", "v", "--fence-group", "f-g", "--fence-partition", "0"},
		{"check-fence", "--group", "f-g", "1"},
		{"check-fence", "--key", "k", "r", "1"},
		{"check-fence", "--queue", "f/q", "--key", "k", "r", "1"},
	} {
		if r := n.lh(args...); r.code != 2 {
			t.Errorf("leasehold %s: %s, want exit 2", strings.Join(args, " "), r)
		}
	}
}
