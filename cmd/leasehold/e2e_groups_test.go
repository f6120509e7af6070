package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/procs"
)

// The groups commands against a real node: create, show and list in JSON
// with the shared field names, grow, and the refusals a person reads.
func TestGroupsCommands(t *testing.T) {
	n := startNode(t)
	var created struct {
		Group      string `json:"group"`
		Partitions int    `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(n.lhOK("groups", "create", "orders", "--partitions", "4", "--json").stdout), &created); err != nil {
		t.Fatal(err)
	}
	if created.Group != "orders" || created.Partitions != 4 {
		t.Fatalf("created %+v", created)
	}
	if r := n.lh("groups", "create", "orders", "--partitions", "8"); r.code == 0 || !strings.Contains(r.stderr, "already exists") {
		t.Fatalf("creating it again: %s", r)
	}
	if r := n.lh("groups", "create", "x"); r.code == 0 || !strings.Contains(r.stderr, "--partitions is required") {
		t.Fatalf("create without --partitions: %s", r)
	}
	n.lhOK("groups", "grow", "orders", "--partitions", "6")
	var show struct {
		Group         string `json:"group"`
		Partitions    int    `json:"partitions"`
		Unowned       int    `json:"unowned"`
		PartitionList []struct {
			Partition int    `json:"partition"`
			Owner     string `json:"owner"`
			Epoch     uint64 `json:"epoch"`
		} `json:"partition_list"`
	}
	if err := json.Unmarshal([]byte(n.lhOK("groups", "show", "orders", "--json").stdout), &show); err != nil {
		t.Fatal(err)
	}
	if show.Partitions != 6 || len(show.PartitionList) != 6 || show.Unowned != 6 {
		t.Fatalf("show after grow: %+v", show)
	}
	var list struct {
		Groups []map[string]any `json:"groups"`
	}
	if err := json.Unmarshal([]byte(n.lhOK("groups", "--json").stdout), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Groups) != 1 || list.Groups[0]["group"] != "orders" || list.Groups[0]["partitions"] != float64(6) {
		t.Fatalf("groups --json: %v", list)
	}
	if r := n.lhOK("groups", "-o", "wide"); !strings.Contains(r.stdout, "REVOKE TIMEOUT") || !strings.Contains(r.stdout, "orders") {
		t.Fatalf("groups -o wide: want the revoke timeout and creation columns\n%s", r)
	}
	if r := n.lh("groups", "show", "nope"); r.code == 0 {
		t.Fatalf("show of a missing group: %s", r)
	}
	if r := n.lh("groups", "delete", "orders", "--yes"); r.code == 0 || !strings.Contains(r.stderr, "--reason is required") {
		t.Fatalf("delete without --reason: %s", r)
	}
	n.lhOK("groups", "delete", "orders", "--reason", "test", "--yes")
	if r := n.lh("groups", "show", "orders"); r.code == 0 {
		t.Fatalf("show after delete: %s", r)
	}
}

// childLine is one line a `groups run` child wrote: start or stop of a
// partition, with its epoch and the time (Unix ns).
type childLine struct {
	event, member string
	partition     int
	epoch         uint64
	at            int64
}

func childLines(path string) []childLine {
	b, _ := os.ReadFile(path)
	var out []childLine
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 {
			continue
		}
		p, _ := strconv.Atoi(f[2])
		e, _ := strconv.ParseUint(f[3], 10, 64)
		at, _ := strconv.ParseInt(f[4], 10, 64)
		out = append(out, childLine{f[0], f[1], p, e, at})
	}
	return out
}

// `groups run` starts one child per owned partition with the partition and
// its epoch in the environment; when a second member joins, each moved
// partition's child on the first member has exited (SIGTERM, it exits at
// once) before the second member's child for it starts; SIGTERM ends both
// members with status 0.
func TestGroupsRunOneChildPerPartition(t *testing.T) {
	n := startNode(t)
	n.lhOK("groups", "create", "g", "--partitions", "4")
	dir := t.TempDir()
	log := filepath.Join(dir, "children")
	script := `echo "start $LEASEHOLD_MEMBER $LEASEHOLD_PARTITION $LEASEHOLD_TOKEN $(date +%s%N)" >> "$LOG"; ` +
		`trap 'echo "stop $LEASEHOLD_MEMBER $LEASEHOLD_PARTITION $LEASEHOLD_TOKEN $(date +%s%N)" >> "$LOG"; exit 0' TERM; ` +
		`while :; do sleep 0.05; done`
	run := func(member string) *proc {
		return startProc(t, dir, "run-"+member, childEnv("LOG="+log), "groups", "--endpoints", n.url, "run", "g",
			"--member", member, "--ttl", "5s", "--grace", "500ms", "--cgroup", "off", "--", "sh", "-c", script)
	}
	running := func() map[string]int {
		out := map[string]int{}
		open := map[[2]int]bool{}
		for _, l := range childLines(log) {
			k := [2]int{l.partition, int(l.epoch)}
			if l.event == "start" {
				open[k] = true
				out[l.member]++
			} else if open[k] {
				delete(open, k)
				out[l.member]--
			}
		}
		return out
	}
	a := run("a")
	checkFor(t, 30*time.Second, func() error {
		if r := running(); r["a"] != 4 {
			return fmt.Errorf("a runs %d children, want 4", r["a"])
		}
		return nil
	})
	b := run("b")
	checkFor(t, 30*time.Second, func() error {
		if r := running(); r["a"] != 2 || r["b"] != 2 {
			return fmt.Errorf("running %v, want 2 each", r)
		}
		return nil
	})
	// For each partition b got, a's child had stopped before b's started.
	lines := childLines(log)
	for _, l := range lines {
		if l.event != "start" || l.member != "b" {
			continue
		}
		for _, s := range lines {
			if s.event == "stop" && s.member == "a" && s.partition == l.partition && s.at > l.at {
				t.Errorf("partition %d: b's child started at %d, before a's stopped at %d", l.partition, l.at, s.at)
			}
		}
		if l.epoch == 0 {
			t.Errorf("partition %d started without an epoch in LEASEHOLD_TOKEN", l.partition)
		}
	}
	for _, p := range []*proc{a, b} {
		p.Signal(syscall.SIGTERM)
		if !p.Wait(30 * time.Second) {
			t.Fatalf("%s did not exit 30s after SIGTERM", p.Name)
		}
		if p.Code() != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0\n%s", p.Name, p.Code(), p.Stderr())
		}
	}
	if r := running(); r["a"] != 0 || r["b"] != 0 {
		t.Fatalf("children still running after both members ended: %v", r)
	}
}

// A command that does not exist is refused with 127 before joining.
func TestGroupsRunMissingCommand(t *testing.T) {
	n := startNode(t)
	n.lhOK("groups", "create", "g", "--partitions", "1")
	if r := n.lh("groups", "run", "g", "--member", "a", "--", "/nonexistent/cmd"); r.code != 127 {
		t.Fatalf("a missing command: %s, want exit 127", r)
	}
}

// The safety test for groups run: two members of a one-partition group;
// the owner's `groups run` process is SIGSTOPped past its TTL. Its child,
// which ignores SIGTERM, is killed by the watchdog before the session's
// deadline: its last heartbeat comes before the other member's child
// starts, with a larger epoch. Resumed, the stopped member joins again and
// owns nothing while the other holds the partition.
func TestGroupsRunStopsChildBeforeNextOwner(t *testing.T) {
	const ttl = 2 * time.Second
	n := startNode(t)
	n.lhOK("groups", "create", "solo", "--partitions", "1")
	dir := t.TempDir()
	log := filepath.Join(dir, "terms")
	runs := map[string]*proc{}
	for _, m := range []string{"a", "b"} {
		p := startProc(t, dir, "run-"+m, childEnv("CANDIDATE="+m, "TERMS="+log, "BEATS="+filepath.Join(dir, "beats")),
			"groups", "--endpoints", n.url, "run", "solo", "--member", m, "--ttl", ttl.String(), "--grace", "300ms",
			"--cgroup", "off", "--", "sh", "-c", procs.BeatingTerm)
		runs[m] = p
		t.Cleanup(func() { p.Cmd.Process.Signal(syscall.SIGCONT) })
	}
	t.Cleanup(func() {
		for _, tm := range procs.Terms(log) {
			syscall.Kill(-tm.Pgid, syscall.SIGKILL)
		}
	})
	var cur procs.Term
	checkFor(t, 20*time.Second, func() error {
		ts := procs.Terms(log)
		if len(ts) != 1 {
			return fmt.Errorf("%d children started, want 1", len(ts))
		}
		cur = ts[0]
		if _, nb := lastBeat(filepath.Join(dir, "beats."+cur.Candidate)); nb < 3 {
			return fmt.Errorf("%s: %d heartbeats so far", cur.Candidate, nb)
		}
		return nil
	})
	owner := runs[cur.Candidate]
	tStop := time.Now()
	owner.Signal(syscall.SIGSTOP)
	var next procs.Term
	checkFor(t, ttl+20*time.Second, func() error {
		ts := procs.Terms(log)
		if len(ts) < 2 {
			return fmt.Errorf("no new owner %v after stopping %s's groups run", time.Since(tStop), cur.Candidate)
		}
		next = ts[1]
		return nil
	})
	if groupAlive(cur.Pgid) {
		t.Errorf("the stopped owner %s's child group %d is still alive while %s owns the partition", cur.Candidate, cur.Pgid, next.Candidate)
	}
	last, _ := lastBeat(filepath.Join(dir, "beats."+cur.Candidate))
	t.Logf("%s (epoch %d) stopped; its last heartbeat %v after the stop; %s (epoch %d) started %v after the stop, %v after that heartbeat",
		cur.Candidate, cur.Token, time.Duration(last-tStop.UnixNano()).Round(time.Millisecond), next.Candidate, next.Token,
		time.Duration(next.Start-tStop.UnixNano()).Round(time.Millisecond), time.Duration(next.Start-last).Round(time.Millisecond))
	if last >= next.Start {
		t.Errorf("%s's child beat at %d, at or after %s's child started at %d: two owners' children ran at once", cur.Candidate, last, next.Candidate, next.Start)
	}
	if next.Candidate == cur.Candidate || next.Token <= cur.Token {
		t.Errorf("the next child: %+v, after %+v; want the other member with a larger epoch", next, cur)
	}
	owner.Signal(syscall.SIGCONT)
	checkFor(t, 20*time.Second, func() error {
		var g struct {
			Members int `json:"members"`
		}
		if err := json.Unmarshal([]byte(n.lhOK("groups", "show", "solo", "--json").stdout), &g); err != nil {
			return err
		}
		if g.Members != 2 {
			return fmt.Errorf("%d members, want 2 (the resumed one joined again)", g.Members)
		}
		return nil
	})
	if ts := procs.Terms(log); len(ts) != 2 {
		t.Errorf("%d children started, want 2: the resumed member must not start one while the other owns the partition", len(ts))
	}
}
