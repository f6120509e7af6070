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
)

// electTerm is one leader's command as it recorded itself.
type electTerm struct {
	candidate string
	token     uint64
	start     int64 // Unix ns
	pgid      int
}

func electTerms(path string) []electTerm {
	b, _ := os.ReadFile(path)
	var out []electTerm
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		tok, _ := strconv.ParseUint(f[1], 10, 64)
		start, _ := strconv.ParseInt(f[2], 10, 64)
		pgid, _ := strconv.Atoi(f[3])
		out = append(out, electTerm{f[0], tok, start, pgid})
	}
	return out
}

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
	const ttl = 3 * time.Second
	nodes := startCluster(t, 3)
	c := newClient(t, "", urls(nodes)...)
	dir := t.TempDir()
	log := filepath.Join(dir, "terms")
	const script = `echo "$CANDIDATE $LEASEHOLD_TOKEN $(date +%s%N) $$" >> "$TERMS"; trap "" TERM; ` +
		`while :; do date +%s%N >> "$BEATS.$CANDIDATE"; sleep 0.02; done`
	procs := map[string]*proc{}
	for _, name := range []string{"a", "b", "c"} {
		p, err := startProc(t, dir, "elect-"+name, childEnv("CANDIDATE="+name, "TERMS="+log, "BEATS="+filepath.Join(dir, "beats")), lhBin,
			"elect", "--endpoints", strings.Join(urls(nodes), ","), "E", "--value", name, "--ttl", ttl.String(),
			"--grace", "300ms", "--cgroup", "off", "--", "sh", "-c", script)
		if err != nil {
			t.Fatal(err)
		}
		procs[name] = p
	}
	t.Cleanup(func() {
		for _, tm := range electTerms(log) {
			syscall.Kill(-tm.pgid, syscall.SIGKILL)
		}
	})
	beating := func(round int) electTerm {
		t.Helper()
		var cur electTerm
		if err := checkFor(progressTimeout, func() error {
			ts := electTerms(log)
			if len(ts) != round {
				return fmt.Errorf("%d terms, want %d", len(ts), round)
			}
			cur = ts[round-1]
			if n := len(beats(filepath.Join(dir, "beats."+cur.candidate))); n < 3 {
				return fmt.Errorf("%s: %d heartbeats", cur.candidate, n)
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
		if err := l.p.kill(); err != nil {
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
		bs := beats(filepath.Join(dir, "beats."+first.candidate))
		if last := bs[len(bs)-1]; time.Duration(last-from.UnixNano()) < 2*ttl {
			return fmt.Errorf("%s's command has beaten %v past the kill", first.candidate, time.Duration(last-from.UnixNano()))
		}
		if ts := electTerms(log); len(ts) != 1 {
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
	procs[first.candidate].signal(syscall.SIGSTOP)
	second := beating(2)
	procs[second.candidate].signal(syscall.SIGSTOP)
	killed = killLeaderNode()
	beating(3)
	if err := killed.start(); err != nil {
		t.Fatal(err)
	}

	ts := electTerms(log)
	sort.Slice(ts, func(i, j int) bool { return ts[i].start < ts[j].start })
	for i := 1; i < len(ts); i++ {
		prev, next := ts[i-1], ts[i]
		bs := beats(filepath.Join(dir, "beats."+prev.candidate))
		last := bs[len(bs)-1]
		t.Logf("term %d: %s (token %d) beat last %v before %s (token %d) started", i, prev.candidate, prev.token,
			time.Duration(next.start-last).Round(time.Millisecond), next.candidate, next.token)
		if last >= next.start {
			t.Errorf("%s's command beat at %d, at or after %s's command started at %d", prev.candidate, last, next.candidate, next.start)
		}
		if next.token <= prev.token {
			t.Errorf("term of %s has token %d, not above %d", next.candidate, next.token, prev.token)
		}
	}
}
