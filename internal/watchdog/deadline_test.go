package watchdog

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is also the watchdog: Start runs /proc/self/exe.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Subcommand {
		os.Exit(Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// TestWatchdogAlone: with nobody pushing (the supervisor stopped right
// after the start), or the supervisor's pipe closed (it died), the watchdog
// alone ends the command's tree: SIGTERM no earlier than deadline - grace -
// killMargin, SIGKILL no earlier than deadline - killMargin, and the last
// sign of life before the deadline. A push moves the deadline.
func TestWatchdogAlone(t *testing.T) {
	const (
		grace  = 300 * time.Millisecond
		margin = 250 * time.Millisecond
		first  = 1500 * time.Millisecond // from the start to the first deadline
	)
	const (
		obeysTerm   = `echo $$ > "$DIR/pid"; trap 'exit 0' TERM; while :; do date +%s%N >> "$DIR/beats"; sleep 0.01; done`
		ignoresTerm = `echo $$ > "$DIR/pid"; trap "" TERM; while :; do date +%s%N >> "$DIR/beats"; sleep 0.01; done`
	)
	for _, tc := range []struct {
		name   string
		script string
		// act runs once the command runs; it returns the deadline the
		// command must be gone by and the earliest it may be gone.
		act func(g *Guard, deadline time.Time) (by, notBefore time.Time)
	}{
		{"no push, command obeys SIGTERM", obeysTerm, func(g *Guard, d time.Time) (time.Time, time.Time) {
			return d, d.Add(-grace - margin)
		}},
		{"no push, command ignores SIGTERM", ignoresTerm, func(g *Guard, d time.Time) (time.Time, time.Time) {
			return d, d.Add(-margin)
		}},
		{"pushed once", ignoresTerm, func(g *Guard, d time.Time) (time.Time, time.Time) {
			d2 := d.Add(time.Second)
			if err := g.Push(d2); err != nil {
				t.Fatal(err)
			}
			return d2, d2.Add(-margin)
		}},
		{"supervisor's pipe closed", ignoresTerm, func(g *Guard, d time.Time) (time.Time, time.Time) {
			closed := time.Now()
			g.deadlines.Close()
			// SIGKILL goes at closed+grace; like every other case the
			// kill gets margin to take effect, and the lease's own
			// deadline bounds it in any case.
			return minTime(closed.Add(grace+margin), d), closed.Add(grace)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			deadline := time.Now().Add(first)
			g, err := Start(Config{Path: "/bin/sh", Args: []string{"sh", "-c", tc.script},
				Env: append(os.Environ(), "DIR="+dir), Deadline: deadline, TTL: 3 * time.Second,
				Grace: grace, KillMargin: margin})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close(5 * time.Second) })
			beats := filepath.Join(dir, "beats")
			var pid int
			for end := time.Now().Add(5 * time.Second); pid == 0 || countLines(beats) < 2; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("the command did not start beating within 5s")
				}
				b, _ := os.ReadFile(filepath.Join(dir, "pid"))
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			by, notBefore := tc.act(g, deadline)

			var goneAt time.Time
			for end := by.Add(5 * time.Second); goneAt.IsZero(); time.Sleep(2 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("the command still runs %v after it should be gone", time.Since(by))
				}
				if !live(pid) {
					goneAt = time.Now()
				}
			}
			last := lastLine(beats)
			t.Logf("DEADLINE %s: gone %v after the earliest allowed, last beat %v before the deadline",
				tc.name, goneAt.Sub(notBefore).Round(time.Millisecond), by.Sub(last).Round(time.Millisecond))
			if goneAt.Before(notBefore) {
				t.Errorf("the command was gone %v before it may be stopped", notBefore.Sub(goneAt))
			}
			if !last.Before(by) {
				t.Errorf("the command's last beat came %v after its deadline", last.Sub(by))
			}
			select {
			case <-g.Finished():
			case <-time.After(10 * time.Second):
				t.Fatal("the watchdog did not exit 10s after its command")
			}
			if tc.name != "supervisor's pipe closed" {
				if o := g.outcome(""); o.Stopped != whyDeadline || !o.LeaseLost {
					t.Errorf("outcome %+v, want stopped at the deadline", o)
				}
			}
			if !g.Close(5 * time.Second) {
				t.Error("Close: the tree is not gone")
			}
			if _, err := os.Stat(g.tree.cgroup); g.tree.cgroup != "" && err == nil {
				t.Errorf("cgroup %s left behind", g.tree.cgroup)
			}
		})
	}
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return len(strings.Fields(string(b)))
}

// lastLine is the last complete timestamp (Unix ns) in path.
func lastLine(path string) time.Time {
	b, _ := os.ReadFile(path)
	f := strings.Fields(string(b))
	for i := len(f) - 1; i >= 0; i-- {
		if ns, err := strconv.ParseInt(f[i], 10, 64); err == nil && len(f[i]) >= 19 {
			return time.Unix(0, ns)
		}
	}
	return time.Time{}
}

// live reports whether pid runs (not a zombie).
func live(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	state, _, _, ok := procStat(pid)
	return ok && state != 'Z' && state != 'X'
}

// TestWatchdogPassesSignalsOn: a SIGTERM or SIGINT sent to the watchdog
// itself (a shutdown signalling every process) reaches the command, which
// ends in its own way: its status comes back, and it counts as not stopped.
func TestWatchdogPassesSignalsOn(t *testing.T) {
	dir := t.TempDir()
	g, err := Start(Config{Path: "/bin/sh", Args: []string{"sh", "-c",
		`trap 'exit 3' TERM; touch "$DIR/ready"; while :; do sleep 0.01; done`},
		Env: append(os.Environ(), "DIR="+dir), Deadline: time.Now().Add(time.Minute), TTL: time.Minute,
		Grace: time.Second, KillMargin: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(5 * time.Second) })
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the command did not start within 5s")
		}
	}
	syscall.Kill(g.WatchdogPid(), syscall.SIGTERM)
	select {
	case <-g.Finished():
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not exit 10s after SIGTERM")
	}
	if o := g.outcome(""); o.Stopped != "" || o.ExitCode() != 3 {
		t.Errorf("outcome %+v (exit code %d), want the command's own exit 3, not stopped", o, o.ExitCode())
	}
}
