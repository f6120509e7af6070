package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/procs"
)

// beats are the heartbeats (Unix ns) a candidate's command wrote.
func beats(path string) []int64 {
	b, _ := os.ReadFile(path)
	var out []int64
	for _, s := range strings.Fields(string(b)) {
		if ns, err := strconv.ParseInt(s, 10, 64); err == nil && len(s) >= 19 {
			out = append(out, ns)
		}
	}
	return out
}

// TestElectUnderFaults runs three `leasehold elect` candidates against a
// 3-node cluster of real processes: the raft leader node is killed (the
// term must survive it), then the leading candidate's elect is stopped
// (SIGSTOP) past the TTL, then both at once. No heartbeat of a term's
// command comes at or after the next term's command started, and tokens
// strictly increase from term to term.
func TestElectUnderFaults(t *testing.T) {
	// By the README's TTL rule a 3s TTL survives a failover of up to ~1.9s;
	// 5s leaves ~3.2s, which raft's election (500ms timeouts) meets even
	// with this machine's cores shared by a loaded CI run (at 3s a kill
	// under load 11 let the first term lapse once).
	const ttl = 5 * time.Second
	nodes := startCluster(t, 3)
	c := newClient(t, "", urls(nodes)...)
	dir := t.TempDir()
	log := filepath.Join(dir, "terms")
	script := procs.BeatingTerm
	elects := map[string]*proc{}
	for _, name := range []string{"a", "b", "c"} {
		p, err := startProc(t, dir, "elect-"+name, childEnv("CANDIDATE="+name, "TERMS="+log, "BEATS="+filepath.Join(dir, "beats")), lhBin,
			"elect", "--endpoints", strings.Join(urls(nodes), ","), "E", "--value", name, "--ttl", ttl.String(),
			"--grace", "300ms", "--cgroup", "off", "--", "sh", "-c", script)
		if err != nil {
			t.Fatal(err)
		}
		elects[name] = p
	}
	t.Cleanup(func() {
		for _, tm := range procs.Terms(log) {
			syscall.Kill(-tm.Pgid, syscall.SIGKILL)
		}
	})
	beating := func(round int) procs.Term {
		t.Helper()
		var cur procs.Term
		if err := checkFor(progressTimeout, func() error {
			ts := procs.Terms(log)
			if len(ts) != round {
				return fmt.Errorf("%d terms, want %d", len(ts), round)
			}
			cur = ts[round-1]
			if n := len(beats(filepath.Join(dir, "beats."+cur.Candidate))); n < 3 {
				return fmt.Errorf("%s: %d heartbeats", cur.Candidate, n)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return cur
	}
	killLeaderNode := func() *node {
		t.Helper()
		l, err := leader(nodes, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("killing leader node %s", l.id)
		if err := l.p.Kill(); err != nil {
			t.Fatal(err)
		}
		return l
	}

	// 1. The raft leader node dies: the first term goes on through the
	// new leader (its command keeps beating past the TTL).
	first := beating(1)
	killed := killLeaderNode()
	from := time.Now()
	if err := checkFor(progressTimeout, func() error {
		bs := beats(filepath.Join(dir, "beats."+first.Candidate))
		if last := bs[len(bs)-1]; time.Duration(last-from.UnixNano()) < 2*ttl {
			return fmt.Errorf("%s's command has beaten %v past the kill (terms so far: %v)", first.Candidate, time.Duration(last-from.UnixNano()), procs.Terms(log))
		}
		if ts := procs.Terms(log); len(ts) != 1 {
			return fmt.Errorf("a new term began across a node kill: %v", ts)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := killed.start(); err != nil {
		t.Fatal(err)
	}

	// 2. The leading candidate stops; 3. the next one stops as its node
	// leader dies.
	elects[first.Candidate].Signal(syscall.SIGSTOP)
	second := beating(2)
	elects[second.Candidate].Signal(syscall.SIGSTOP)
	killed = killLeaderNode()
	beating(3)
	if err := killed.start(); err != nil {
		t.Fatal(err)
	}

	ts := procs.Terms(log)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Start < ts[j].Start })
	for i := 1; i < len(ts); i++ {
		prev, next := ts[i-1], ts[i]
		bs := beats(filepath.Join(dir, "beats."+prev.Candidate))
		last := bs[len(bs)-1]
		t.Logf("term %d: %s (token %d) beat last %v before %s (token %d) started", i, prev.Candidate, prev.Token,
			time.Duration(next.Start-last).Round(time.Millisecond), next.Candidate, next.Token)
		if last >= next.Start {
			t.Errorf("%s's command beat at %d, at or after %s's command started at %d", prev.Candidate, last, next.Candidate, next.Start)
		}
		if next.Token <= prev.Token {
			t.Errorf("term of %s has token %d, not above %d", next.Candidate, next.Token, prev.Token)
		}
	}
}
