package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The run tests are timing-sensitive, so they do not call t.Parallel: they
// run first, alone, and the parallel tests wait until they are done.

func TestRunPassesEnvAndExitStatus(t *testing.T) {
	n := startNode(t)
	const script = `echo $LEASEHOLD_TOKEN $LEASEHOLD_RESOURCE $LEASEHOLD_LEASE_ID; exit 7`

	checkEnvRun := func(t *testing.T, r cliResult, resource string) {
		t.Helper()
		n := n.with(t)
		if r.code != 7 {
			t.Fatalf("want the child's exit status 7: %s", r)
		}
		f := strings.Fields(r.stdout)
		if len(f) != 3 {
			t.Fatalf("child printed %q, want TOKEN RESOURCE LEASE_ID", r.stdout)
		}
		tok, err1 := strconv.ParseUint(f[0], 10, 64)
		id, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || tok == 0 || id == 0 || f[1] != resource {
			t.Fatalf("child printed %q, want a positive token, %s and a lease id", r.stdout, resource)
		}
		// Released on exit, before run itself exited.
		if s := n.lhOK("status", resource); strings.TrimSpace(s.stdout) != resource+": free" {
			t.Errorf("after run exited, status %s: %q, want free", resource, s.stdout)
		}
	}

	t.Run("env and exit status", func(t *testing.T) {
		n := n.with(t)
		r := n.lh("run", "R", "--ttl", "2s", "--grace", "300ms", "--", "sh", "-c", script)
		checkEnvRun(t, r, "R")
	})

	t.Run("issue command with the default grace", func(t *testing.T) {
		n := n.with(t)
		r := n.lh("run", "R", "--ttl", "2s", "--", "sh", "-c", script)
		if r.code != 7 && strings.Contains(r.stderr, "too long for --ttl") {
			knownBug(t, "`run --ttl 2s` without --grace is refused: the default --grace 2s does not fit a 2s TTL: %s", r.stderr)
		}
		checkEnvRun(t, r, "R")
	})

	t.Run("child killed by a signal", func(t *testing.T) {
		n := n.with(t)
		r := n.lh("run", "K", "--ttl", "2s", "--grace", "300ms", "--", "sh", "-c", "kill -KILL $$")
		if r.code != 128+int(syscall.SIGKILL) {
			t.Errorf("want status %d for a child killed by SIGKILL: %s", 128+int(syscall.SIGKILL), r)
		}
	})

	t.Run("signals are passed on", func(t *testing.T) {
		n := n.with(t)
		dir := t.TempDir()
		ready := filepath.Join(dir, "ready")
		p := startProc(t, dir, "run", childEnv("READY="+ready), "run", "--endpoints", n.url, "S",
			"--ttl", "2s", "--grace", "300ms", "--",
			"sh", "-c", `trap 'echo got TERM; exit 3' TERM; touch "$READY"; while :; do sleep 0.05; done`)
		checkFor(t, 10*time.Second, func() error {
			if p.Exited() {
				t.Fatalf("run exited early: %v\n%s", p.Err, p.Stderr())
			}
			_, err := os.Stat(ready)
			return err
		})
		p.Cmd.Process.Signal(syscall.SIGTERM)
		if !p.Wait(10 * time.Second) {
			t.Fatalf("run still going 10s after SIGTERM")
		}
		if p.Code() != 3 || !strings.Contains(p.Stdout(), "got TERM") {
			t.Errorf("want the child to get SIGTERM and run to exit with its status 3; got %v\nstdout: %s\nstderr: %s",
				p.Err, p.Stdout(), p.Stderr())
		}
		if s := n.lhOK("status", "S"); strings.TrimSpace(s.stdout) != "S: free" {
			t.Errorf("after run exited, status S: %q, want free", s.stdout)
		}
	})

	t.Run("child outlives the ttl", func(t *testing.T) {
		n := n.with(t)
		const ttl, sleep = time.Second, 3 * time.Second
		start := time.Now()
		p := startProc(t, t.TempDir(), "run", childEnv(), "run", "--endpoints", n.url, "R2",
			"--ttl", ttl.String(), "--grace", "100ms", "--",
			"sh", "-c", fmt.Sprintf("echo $LEASEHOLD_TOKEN $LEASEHOLD_LEASE_ID; sleep %d; echo done", int(sleep.Seconds())))
		var tok, id string
		var renewals uint64
		for deadline := start.Add(sleep + 10*time.Second); !p.Exited() && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			f := strings.Fields(p.Stdout())
			if len(f) < 2 {
				continue
			}
			tok, id = f[0], f[1]
			g, err := n.get("R2")
			if err != nil || g.Holder == nil {
				continue // the lease is released when run exits; judged below
			}
			if strconv.FormatUint(g.Holder.Token, 10) != tok || strconv.FormatUint(g.Holder.Id, 10) != id {
				t.Errorf("while the child runs, R2 is held by lease %d token %d; the child got lease %s token %s",
					g.Holder.Id, g.Holder.Token, id, tok)
			}
			renewals = max(renewals, g.Holder.RenewCount)
		}
		if !p.Wait(5 * time.Second) {
			t.Fatalf("run still going %v after it started a %v child", time.Since(start), sleep)
		}
		took := p.ExitedAt.Sub(start)
		t.Logf("run took %v; the lease was renewed %d times; run's stderr: %q", took.Round(time.Millisecond), renewals, p.Stderr())
		if p.Code() != 0 || !strings.Contains(p.Stdout(), "done") {
			t.Fatalf("want the child to finish (\"done\") and run to exit 0; got %v\nstdout: %s\nstderr: %s", p.Err, p.Stdout(), p.Stderr())
		}
		if took < sleep {
			t.Errorf("run exited after %v, before its child could have slept %v", took, sleep)
		}
		if min := uint64(sleep/ttl) - 1; renewals < min {
			t.Errorf("the lease was renewed %d times during a %v child with a %v TTL, want at least %d", renewals, sleep, ttl, min)
		}
		if s := n.lhOK("status", "R2"); strings.TrimSpace(s.stdout) != "R2: free" {
			t.Errorf("after run exited, status R2: %q, want free", s.stdout)
		}
	})
}

// lastBeat is the last complete timestamp (Unix ns) in the heartbeat file.
func lastBeat(path string) (int64, int) {
	b, _ := os.ReadFile(path)
	lines := strings.Fields(string(b))
	for i := len(lines) - 1; i >= 0; i-- {
		if ns, err := strconv.ParseInt(lines[i], 10, 64); err == nil && len(lines[i]) >= 19 {
			return ns, len(lines)
		}
	}
	return 0, len(lines)
}

// TestRunKillsChildBeforeDeadline is the safety test for run: when renewals
// stop getting through (the server stopped, or gone), the child and its
// whole process group are dead before the lease could have expired on the
// server, even if the child ignores SIGTERM.
//
// The last renewal that succeeded was sent before T_stop, so the server's
// expiry is at most T_stop + TTL: the child must be gone before that.
func TestRunKillsChildBeforeDeadline(t *testing.T) {
	const ttl = 2 * time.Second
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{
		{"server stopped (SIGSTOP)", syscall.SIGSTOP},
		{"server killed (SIGKILL)", syscall.SIGKILL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t)
			dir := t.TempDir()
			beats, pidFile := filepath.Join(dir, "beats"), filepath.Join(dir, "pid")
			const script = `echo $$ > "$PIDFILE"; trap "" TERM; while :; do date +%s%N >> "$BEATS"; sleep 0.02; done`
			p := startProc(t, dir, "run", childEnv("BEATS="+beats, "PIDFILE="+pidFile),
				"run", "--endpoints", n.url, "R", "--ttl", ttl.String(), "--grace", "300ms", "--", "sh", "-c", script)
			t.Cleanup(func() { n.p.Cmd.Process.Signal(syscall.SIGCONT) })

			// Wait for beats and for at least one renewal.
			var pgid int
			checkFor(t, 15*time.Second, func() error {
				if p.Exited() {
					t.Fatalf("run exited early: %v\n%s", p.Err, p.Stderr())
				}
				if pgid == 0 {
					b, _ := os.ReadFile(pidFile)
					pgid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
					if pgid == 0 {
						return fmt.Errorf("child has not written its pid yet")
					}
					// The child is never killed here, whatever happens.
					t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
				}
				if _, nb := lastBeat(beats); nb < 3 {
					return fmt.Errorf("%d heartbeats so far", nb)
				}
				g, err := n.get("R")
				if err != nil {
					return err
				}
				if g.Holder == nil || g.Holder.RenewCount < 1 {
					return fmt.Errorf("R: holder %v, waiting for a renewal", g.Holder)
				}
				return nil
			})
			if !groupAlive(pgid) {
				t.Fatalf("child group %d is not alive before the server is stopped", pgid)
			}

			tStop := time.Now()
			n.signal(tc.sig)
			limit := tStop.Add(ttl)

			var goneAt time.Time
			for time.Since(tStop) < ttl+10*time.Second {
				if !groupAlive(pgid) {
					goneAt = time.Now()
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			if goneAt.IsZero() {
				t.Fatalf("the child's process group is still alive %v after the server was stopped (TTL %v)", time.Since(tStop), ttl)
			}
			last, _ := lastBeat(beats)
			lastAt := time.Unix(0, last)
			t.Logf("MARGIN %s: child group gone %v after T_stop, %v before T_stop+TTL; last heartbeat %v after T_stop, %v before T_stop+TTL",
				tc.name, goneAt.Sub(tStop).Round(time.Millisecond), limit.Sub(goneAt).Round(time.Millisecond),
				lastAt.Sub(tStop).Round(time.Millisecond), limit.Sub(lastAt).Round(time.Millisecond))
			if !goneAt.Before(limit) {
				t.Errorf("the child's process group was still alive %v after T_stop, past T_stop + TTL (%v): it may have run without the lease",
					goneAt.Sub(tStop), ttl)
			}
			if last >= limit.UnixNano() {
				t.Errorf("the child's last heartbeat came %v after T_stop, past T_stop + TTL (%v)", lastAt.Sub(tStop), ttl)
			}

			// run reports that it had to stop the child: EX_TEMPFAIL.
			if !p.Wait(ttl + 15*time.Second) {
				t.Fatalf("run still going %v after T_stop\n%s", time.Since(tStop), p.Stderr())
			}
			t.Logf("run exited %v after T_stop with %v", p.ExitedAt.Sub(tStop).Round(time.Millisecond), p.Err)
			if p.Code() != 124 {
				t.Errorf("run exited with %v, want status 124\n%s", p.Err, p.Stderr())
			}
			if !strings.Contains(p.Stderr(), "could not be kept") {
				t.Errorf("run's stderr does not say why it stopped the child:\n%s", p.Stderr())
			}
			if again, _ := lastBeat(beats); again != last {
				t.Errorf("a heartbeat at %v came after the child's group was seen dead", time.Unix(0, again))
			}

			// Once the server is back, it expires the lease itself.
			if tc.sig == syscall.SIGSTOP {
				n.signal(syscall.SIGCONT)
			} else {
				n.start()
			}
			checkFor(t, 10*time.Second, func() error {
				g, err := n.get("R")
				if err != nil {
					return err
				}
				if g.Holder != nil {
					return fmt.Errorf("R still held by %v", g.Holder)
				}
				return nil
			})
		})
	}
}

// TestRunLeavesNoProcessBehind: nothing that run started may outlive the
// lease: not a background job of the child after run released the lease,
// and not the child after run itself was killed and the lease expired.
func TestRunLeavesNoProcessBehind(t *testing.T) {
	n := startNode(t)
	const ttl = 2 * time.Second

	t.Run("background job of the child", func(t *testing.T) {
		n := n.with(t)
		dir := t.TempDir()
		beats, pidFile := filepath.Join(dir, "beats"), filepath.Join(dir, "pid")
		const script = `echo $$ > "$PIDFILE"; (while :; do date +%s%N >> "$BEATS"; sleep 0.02; done) & sleep 0.3; exit 0`
		p := startProc(t, dir, "run", childEnv("BEATS="+beats, "PIDFILE="+pidFile),
			"run", "--endpoints", n.url, "B", "--ttl", ttl.String(), "--grace", "300ms", "--", "sh", "-c", script)
		if !p.Wait(15 * time.Second) {
			t.Fatalf("run still going 15s after it started a 0.3s child")
		}
		b, _ := os.ReadFile(pidFile)
		pgid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pgid <= 0 {
			t.Fatalf("the child wrote no pid: %q", b)
		}
		t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
		if p.Code() != 0 {
			t.Fatalf("run: %v\n%s", p.Err, p.Stderr())
		}
		if s := n.lhOK("status", "B"); strings.TrimSpace(s.stdout) != "B: free" {
			t.Fatalf("after run exited, status B: %q, want free", s.stdout)
		}
		// The lease is released: anyone may take B now.
		if groupAlive(pgid) {
			_, before := lastBeat(beats)
			time.Sleep(100 * time.Millisecond)
			_, after := lastBeat(beats)
			knownBug(t, "run released the lease on B while a background job of its child (process group %d) still runs: %d heartbeats in the 100ms after run exited",
				pgid, after-before)
		}
	})

	t.Run("run itself SIGKILLed", func(t *testing.T) {
		n := n.with(t)
		dir := t.TempDir()
		beats, pidFile := filepath.Join(dir, "beats"), filepath.Join(dir, "pid")
		const script = `echo $$ > "$PIDFILE"; while :; do date +%s%N >> "$BEATS"; sleep 0.02; done`
		p := startProc(t, dir, "run", childEnv("BEATS="+beats, "PIDFILE="+pidFile),
			"run", "--endpoints", n.url, "P", "--ttl", ttl.String(), "--grace", "300ms", "--", "sh", "-c", script)
		var pgid int
		checkFor(t, 10*time.Second, func() error {
			if p.Exited() {
				t.Fatalf("run exited early: %v\n%s", p.Err, p.Stderr())
			}
			b, _ := os.ReadFile(pidFile)
			if pgid, _ = strconv.Atoi(strings.TrimSpace(string(b))); pgid == 0 {
				return fmt.Errorf("no pid yet")
			}
			if _, nb := lastBeat(beats); nb < 3 {
				return fmt.Errorf("%d heartbeats so far", nb)
			}
			return nil
		})
		t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })

		tKill := time.Now()
		p.Cmd.Process.Kill()
		if !p.Wait(exitTimeout) {
			t.Fatalf("run not reaped after SIGKILL")
		}
		// No renewal is sent after tKill, so the server may hand P to
		// someone else from tKill + TTL on.
		for time.Since(tKill) < ttl && groupAlive(pgid) {
			time.Sleep(10 * time.Millisecond)
		}
		if groupAlive(pgid) {
			last, _ := lastBeat(beats)
			knownBug(t, "`leasehold run` was SIGKILLed; %v later (TTL %v) its child still runs without the lease (last heartbeat %v after the kill)",
				time.Since(tKill).Round(time.Millisecond), ttl, time.Unix(0, last).Sub(tKill).Round(time.Millisecond))
		}
		t.Logf("the child's group was gone %v after run was SIGKILLed", time.Since(tKill).Round(time.Millisecond))
	})
}
