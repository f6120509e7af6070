package main_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
	"github.com/leasehold/leasehold/internal/procs"
)

// TestElectStopsChildBeforeNextLeader is the safety test for elect: three
// candidates run `leasehold elect E -- CMD`; the leading candidate's elect
// process is stopped (SIGSTOP) past the TTL, twice in turn. Each time the
// stopped leader's child (which ignores SIGTERM) is dead, by its last
// heartbeat, before the next leader's child starts, and each term's token
// is larger than the last.
func TestElectStopsChildBeforeNextLeader(t *testing.T) {
	const ttl = 2 * time.Second
	n := startNode(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "terms")
	// Each child records its term, then beats into its own file until killed.
	script := procs.BeatingTerm
	watcher := startProc(t, dir, "observe", childEnv(), "elect", "--endpoints", n.url, "E", "--observe", "--json")
	elects := map[string]*proc{}
	for _, name := range []string{"a", "b", "c"} {
		p := startProc(t, dir, "elect-"+name, childEnv("CANDIDATE="+name, "TERMS="+log, "BEATS="+filepath.Join(dir, "beats")),
			"elect", "--endpoints", n.url, "E", "--value", name, "--ttl", ttl.String(), "--grace", "300ms", "--cgroup", "off",
			"--", "sh", "-c", script)
		elects[name] = p
		t.Cleanup(func() { p.Cmd.Process.Signal(syscall.SIGCONT) })
	}
	t.Cleanup(func() {
		for _, tm := range procs.Terms(log) {
			syscall.Kill(-tm.Pgid, syscall.SIGKILL)
		}
	})

	for round := 1; round <= 2; round++ {
		var cur procs.Term
		checkFor(t, 20*time.Second, func() error {
			ts := procs.Terms(log)
			if len(ts) != round {
				return fmt.Errorf("%d terms started, want %d", len(ts), round)
			}
			cur = ts[round-1]
			if _, nb := lastBeat(filepath.Join(dir, "beats."+cur.Candidate)); nb < 3 {
				return fmt.Errorf("%s: %d heartbeats so far", cur.Candidate, nb)
			}
			return nil
		})
		leader := elects[cur.Candidate]
		tStop := time.Now()
		leader.Cmd.Process.Signal(syscall.SIGSTOP)

		var next procs.Term
		checkFor(t, ttl+20*time.Second, func() error {
			ts := procs.Terms(log)
			if len(ts) <= round {
				return fmt.Errorf("no new term %v after stopping %s's elect", time.Since(tStop), cur.Candidate)
			}
			next = ts[round]
			return nil
		})
		// Judged once the old group is dead: its last heartbeat is final.
		if groupAlive(cur.Pgid) {
			t.Errorf("round %d: the stopped leader %s's child group %d is still alive while %s leads", round, cur.Candidate, cur.Pgid, next.Candidate)
		}
		last, _ := lastBeat(filepath.Join(dir, "beats."+cur.Candidate))
		t.Logf("round %d: %s (token %d) stopped; its last heartbeat %v after the stop; %s (token %d) started %v after the stop, %v after that heartbeat",
			round, cur.Candidate, cur.Token, time.Duration(last-tStop.UnixNano()).Round(time.Millisecond), next.Candidate, next.Token,
			time.Duration(next.Start-tStop.UnixNano()).Round(time.Millisecond), time.Duration(next.Start-last).Round(time.Millisecond))
		if last >= next.Start {
			t.Errorf("round %d: %s's child beat at %d, at or after %s's child started at %d: two leaders' commands ran at once",
				round, cur.Candidate, last, next.Candidate, next.Start)
		}
		if next.Token <= cur.Token {
			t.Errorf("round %d: token %d of %s's term is not above %d of %s's", round, next.Token, next.Candidate, cur.Token, cur.Candidate)
		}
		if next.Candidate == cur.Candidate {
			t.Errorf("round %d: the stopped candidate %s leads again", round, cur.Candidate)
		}
	}

	// The observer printed each term's leader, in order.
	ts := procs.Terms(log)
	checkFor(t, 10*time.Second, func() error {
		var seen []string
		for _, line := range strings.Split(watcher.Stdout(), "\n") {
			var l struct {
				Leading bool   `json:"leading"`
				Value   string `json:"value"`
				Token   uint64 `json:"token"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Leading {
				seen = append(seen, fmt.Sprintf("%s/%d", l.Value, l.Token))
			}
		}
		var want []string
		for _, tm := range ts {
			want = append(want, fmt.Sprintf("%s/%d", tm.Candidate, tm.Token))
		}
		if !slices.Equal(seen, want) {
			return fmt.Errorf("the observer printed leaders %v; want %v\n%s", seen, want, watcher.Stdout())
		}
		return nil
	})

	// elections lists the election and its leader; the others, stopped,
	// are no longer in line.
	out := n.lhOK("elections", "--json").stdout
	var es cliout.Elections
	if err := decodeStrict(out, &es); err != nil || len(es.Elections) != 1 {
		t.Fatalf("elections --json: want one election (%v)\n%s", err, out)
	}
	e := es.Elections[0]
	if last := ts[len(ts)-1]; e.Election != "E" || e.Value != last.Candidate || e.Token != last.Token || e.Candidates != 0 {
		t.Errorf("elections --json: %s; want E led by %s with token %d and no candidate (the others are stopped)", out, last.Candidate, last.Token)
	}
}

// TestElectFailoverTime measures election failover with real processes:
// from SIGKILL of the leading candidate's elect process to the next
// candidate's command starting, over 5 runs (TTL 2s, so about 2s is the
// expectation: the killed leader's lease must expire first).
//
//	go test -run TestElectFailoverTime -v -count=1 ./cmd/leasehold
func TestElectFailoverTime(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement; skipped with -short")
	}
	const ttl, runs = 2 * time.Second, 5
	n := startNode(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "terms")
	const script = `echo "$CANDIDATE $LEASEHOLD_TOKEN $(date +%s%N) $$" >> "$TERMS"; exec sleep 1000`
	elects := map[string]*proc{}
	for i := range runs + 1 {
		name := fmt.Sprintf("c%d", i)
		elects[name] = startProc(t, dir, "elect-"+name, childEnv("CANDIDATE="+name, "TERMS="+log),
			"elect", "--endpoints", n.url, "F", "--value", name, "--ttl", ttl.String(), "--grace", "300ms", "--cgroup", "off",
			"--", "sh", "-c", script)
	}
	t.Cleanup(func() {
		for _, tm := range procs.Terms(log) {
			syscall.Kill(-tm.Pgid, syscall.SIGKILL)
		}
	})
	var took []time.Duration
	for run := 1; run <= runs; run++ {
		var cur procs.Term
		checkFor(t, 20*time.Second, func() error {
			if ts := procs.Terms(log); len(ts) != run {
				return fmt.Errorf("%d terms, want %d", len(ts), run)
			}
			cur = procs.Terms(log)[run-1]
			return nil
		})
		killed := time.Now()
		elects[cur.Candidate].Cmd.Process.Kill()
		var next procs.Term
		checkFor(t, ttl+20*time.Second, func() error {
			ts := procs.Terms(log)
			if len(ts) <= run {
				return fmt.Errorf("no new leader %v after killing %s", time.Since(killed), cur.Candidate)
			}
			next = ts[run]
			return nil
		})
		d := time.Duration(next.Start - killed.UnixNano())
		took = append(took, d)
		t.Logf("run %d: killed %s (token %d); %s (token %d) led %v later", run, cur.Candidate, cur.Token, next.Candidate, next.Token, d.Round(time.Millisecond))
		if next.Token <= cur.Token {
			t.Errorf("run %d: token %d is not above %d", run, next.Token, cur.Token)
		}
	}
	slices.Sort(took)
	t.Logf("election failover (leading elect process SIGKILLed -> next candidate's command started), TTL %v, %d runs: median %v, max %v",
		ttl, runs, took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}

// TestElectUsage: elect refuses what it cannot run with a message that
// says what is wrong, before contacting the cluster.
func TestElectUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"elect", "E"}, "no command to run: leasehold elect NAME [flags] -- CMD [ARGS...]"},
		{[]string{"elect", "E", "sh"}, "put -- before the command"},
		{[]string{"elect", "E", "--observe", "--", "sh"}, "no command, with --observe"},
		{[]string{"elect", "E", "--ttl", "1s", "--grace", "1s", "--", "true"}, "--grace 1s is too long for --ttl 1s"},
		{[]string{"elect", "E", "--cgroup", "maybe", "--", "true"}, "--cgroup \"maybe\""},
	} {
		args := append([]string{tc.args[0], "--endpoints", "http://127.0.0.1:1"}, tc.args[1:]...)
		r := lhEnv(t, childEnv(), args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("leasehold %s: want exit 2 saying %q; got %s", strings.Join(tc.args, " "), tc.want, r)
		}
	}
}
