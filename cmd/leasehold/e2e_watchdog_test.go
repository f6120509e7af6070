package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The watchdog tests are timing-sensitive like the run tests: no
// t.Parallel.

// faultTree is the command every watchdog test runs: a child and a
// daemonized grandchild (it left the process group and session with setsid,
// and its parent exited), both ignoring SIGTERM, both writing timestamps.
// Only a SIGKILL that reaches the whole tree stops both.
const faultTree = `echo $LEASEHOLD_LEASE_ID > "$DIR/lease"; echo $$ > "$DIR/pid1"
(setsid sh -c 'trap "" TERM; echo $$ > "$DIR/pid2"; while :; do date +%s%N >> "$DIR/beats2"; sleep 0.02; done' &)
trap "" TERM; while :; do date +%s%N >> "$DIR/beats1"; sleep 0.02; done`

// runLine is run -v's first line on stderr: who guards what, and how.
var runLine = regexp.MustCompile(`watchdog pid (\d+) guards pid (\d+) \((cgroup (\S+)|process group[^)]*\)?)\)`)

// TestRunWatchdogFaults: whatever stops or kills run, its watchdog, or the
// server, every process of the command's tree has stopped writing before
// anyone else is granted the resource, and before the last renewal plus
// the TTL; the time from the fault to the tree's death is within its bound;
// nothing restarts afterwards, and no process or cgroup is left behind.
func TestRunWatchdogFaults(t *testing.T) {
	const (
		ttl        = 3 * time.Second
		grace      = 500 * time.Millisecond
		killMargin = 250 * time.Millisecond // run.go's
		tick       = ttl / 30               // internal/watchdog's, for this TTL
		slack      = time.Second            // scheduling on a loaded machine
	)
	type fault struct {
		name   string
		target string // "run", "watchdog" or "server"
		sig    syscall.Signal
		// bound on the time from the fault to the tree's death; 0: only
		// the lease's own bound (last renewal + TTL) applies.
		bound time.Duration
	}
	faults := []fault{
		{"run stopped", "run", syscall.SIGSTOP, 0},
		{"run killed", "run", syscall.SIGKILL, grace},
		{"watchdog stopped", "watchdog", syscall.SIGSTOP, tick + grace},
		{"watchdog killed", "watchdog", syscall.SIGKILL, tick},
		{"server stopped", "server", syscall.SIGSTOP, 0},
	}
	for _, mode := range []string{"auto", "off"} {
		for _, f := range faults {
			t.Run(fmt.Sprintf("cgroup %s/%s", mode, f.name), func(t *testing.T) {
				n := startNode(t)
				dir := t.TempDir()
				t.Cleanup(func() { n.p.Cmd.Process.Signal(syscall.SIGCONT) })
				p := startProc(t, dir, "run", childEnv("DIR="+dir),
					"run", "--endpoints", n.url, "R", "-v", "--ttl", ttl.String(), "--grace", grace.String(), "--cgroup", mode,
					"--", "sh", "-c", faultTree)

				// Wait until the tree runs and the lease was renewed once.
				var pids [2]int
				var watchdogPid int
				var cgroup string
				var leaseID uint64
				var lastRenewal time.Time
				beats := [2]string{filepath.Join(dir, "beats1"), filepath.Join(dir, "beats2")}
				checkFor(t, 20*time.Second, func() error {
					if p.Exited() {
						t.Fatalf("run exited early: %v\n%s", p.Err, p.Stderr())
					}
					m := runLine.FindStringSubmatch(p.Stderr())
					if m == nil {
						return fmt.Errorf("run has not said what guards the command: %q", p.Stderr())
					}
					watchdogPid, _ = strconv.Atoi(m[1])
					cgroup = m[4]
					if (mode == "auto") != (cgroup != "") {
						t.Fatalf("--cgroup %s, but run says: %s", mode, m[0])
					}
					for i := range pids {
						if pids[i] == 0 {
							pids[i] = readInt(filepath.Join(dir, fmt.Sprintf("pid%d", i+1)))
							if pids[i] != 0 {
								pid := pids[i]
								t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
							}
						}
						if _, nb := lastBeat(beats[i]); nb < 3 {
							return fmt.Errorf("beats%d: %d heartbeats so far", i+1, nb)
						}
					}
					leaseID = uint64(readInt(filepath.Join(dir, "lease")))
					g, err := n.get("R")
					if err != nil {
						return err
					}
					if g.Holder == nil || g.Holder.Id != leaseID || g.Holder.RenewCount < 1 {
						return fmt.Errorf("R: holder %v, waiting for lease %d's first renewal", g.Holder, leaseID)
					}
					lastRenewal = g.Holder.RenewedAt.AsTime()
					return nil
				})
				if !procAlive(pids[0]) || !procAlive(pids[1]) {
					t.Fatalf("the command's tree (%v) does not run before the fault", pids)
				}

				target := map[string]int{"run": p.Pid(), "watchdog": watchdogPid, "server": n.p.Pid()}[f.target]
				tFault := time.Now()
				if err := syscall.Kill(target, f.sig); err != nil {
					t.Fatalf("%v to %s (pid %d): %v", f.sig, f.target, target, err)
				}

				// Someone else asks for R at once (once the server answers).
				var acq *proc
				startAcquire := func() {
					acq = startProc(t, dir, "acquire", childEnv(), "acquire", "--endpoints", n.url, "R",
						"--wait", "60s", "--ttl", "30s", "--json")
				}
				if f.target != "server" {
					startAcquire()
				}
				var goneAt, grantedAt time.Time
				for end := tFault.Add(ttl + 30*time.Second); goneAt.IsZero() || grantedAt.IsZero(); time.Sleep(2 * time.Millisecond) {
					if !grantedAt.IsZero() && end.After(time.Now().Add(2*time.Second)) {
						end = time.Now().Add(2 * time.Second) // R is someone else's now: no more waiting
					}
					if time.Now().After(end) {
						t.Fatalf("%v after the fault: the tree is gone at %v, R granted to another at %v; tree alive: %v, %v\nrun: %s",
							time.Since(tFault), goneAt, grantedAt, procAlive(pids[0]), procAlive(pids[1]), p.Stderr())
					}
					if goneAt.IsZero() && !procAlive(pids[0]) && !procAlive(pids[1]) {
						goneAt = time.Now()
						if f.target == "server" {
							n.signal(syscall.SIGCONT)
							startAcquire()
						}
					}
					if acq == nil {
						continue
					}
					g, err := n.get("R")
					if err != nil || g.Holder == nil {
						continue
					}
					if g.Holder.Id == leaseID {
						// Only a renewal made before the fault can have
						// been pushed by a run that was then stopped or
						// killed; one the server took from its socket
						// after resuming cannot (run gave up on it).
						if r := g.Holder.RenewedAt.AsTime(); r.Before(tFault) && r.After(lastRenewal) {
							lastRenewal = r
						}
						continue
					}
					if grantedAt.IsZero() {
						grantedAt = g.Holder.AcquiredAt.AsTime()
					}
				}
				limit := lastRenewal.Add(ttl)
				t.Logf("MARGIN %s: tree gone %v after the fault and %v after the last renewal (%v before it +TTL); R granted to another %v after the fault",
					f.name, goneAt.Sub(tFault).Round(time.Millisecond), goneAt.Sub(lastRenewal).Round(time.Millisecond),
					limit.Sub(goneAt).Round(time.Millisecond), grantedAt.Sub(tFault).Round(time.Millisecond))
				for i, path := range beats {
					last, _ := lastBeat(path)
					at := time.Unix(0, last)
					if !at.Before(grantedAt) {
						t.Errorf("beats%d: a heartbeat at %v, %v after R was granted to another", i+1, at, at.Sub(grantedAt))
					}
					if !at.Before(limit) {
						t.Errorf("beats%d: a heartbeat %v after the last renewal, past the TTL %v", i+1, at.Sub(lastRenewal), ttl)
					}
				}
				if !goneAt.Before(limit) {
					t.Errorf("the tree was seen alive %v after the last renewal, past the TTL %v", goneAt.Sub(lastRenewal), ttl)
				}
				if f.bound > 0 && goneAt.Sub(tFault) > f.bound+slack {
					t.Errorf("the tree died %v after the fault, want within %v (+%v slack)", goneAt.Sub(tFault), f.bound, slack)
				}

				// Resumed, run does not restart anything, and says why it
				// stopped the command.
				if f.target == "run" && f.sig == syscall.SIGSTOP {
					p.Cmd.Process.Signal(syscall.SIGCONT)
				}
				if !p.Wait(20 * time.Second) {
					t.Fatalf("run still going %v after the fault\n%s", time.Since(tFault), p.Stderr())
				}
				if f.target == "run" && f.sig == syscall.SIGKILL {
					if p.Code() != -1 {
						t.Errorf("run exited with %v after SIGKILL", p.Err)
					}
				} else if p.Code() != 124 {
					t.Errorf("run exited with %v, want 124\n%s", p.Err, p.Stderr())
				}
				t.Logf("run: %v\n%s", p.Err, p.Stderr())
				before := [2]int{}
				for i, path := range beats {
					_, before[i] = lastBeat(path)
				}
				time.Sleep(300 * time.Millisecond) // a window for anything restarted to write
				for i, path := range beats {
					if _, nb := lastBeat(path); nb != before[i] {
						t.Errorf("beats%d grew from %d to %d heartbeats after run exited", i+1, before[i], nb)
					}
				}
				checkFor(t, 10*time.Second, func() error {
					if procAlive(watchdogPid) {
						return fmt.Errorf("the watchdog (pid %d) still runs", watchdogPid)
					}
					if cgroup != "" {
						if _, err := os.Stat(cgroup); err == nil {
							return fmt.Errorf("cgroup %s is left behind", cgroup)
						}
					}
					return nil
				})
			})
		}
	}
}

// readInt reads a number a process wrote to path (0 if none yet).
func readInt(path string) int {
	b, _ := os.ReadFile(path)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// procAlive reports whether pid runs (a zombie does not; a stopped
// process does).
func procAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

// TestRunKillsDaemonizedGrandchild: a grandchild that left the child's
// process group and session (setsid) and whose parent exited is still part
// of the tree: when the child exits, it is gone before run releases the
// lease, in both ways of holding the tree.
func TestRunKillsDaemonizedGrandchild(t *testing.T) {
	n := startNode(t)
	for _, mode := range []string{"auto", "off"} {
		t.Run("cgroup "+mode, func(t *testing.T) {
			n := n.with(t)
			dir := t.TempDir()
			const script = `(setsid sh -c 'echo $$ > "$DIR/pid2"; while :; do date +%s%N >> "$DIR/beats2"; sleep 0.02; done' &)
while [ ! -s "$DIR/beats2" ]; do sleep 0.01; done; exit 0`
			// Output to files: a surviving grandchild must fail the checks
			// below, not hang a pipe.
			p := startProc(t, dir, "run", childEnv("DIR="+dir), "run", "--endpoints", n.url, "D", "--ttl", "3s", "--grace", "500ms",
				"--cgroup", mode, "--", "sh", "-c", script)
			if !p.Wait(cliTimeout) {
				t.Fatalf("run still going %v after it started a child that exits at once", cliTimeout)
			}
			pid := readInt(filepath.Join(dir, "pid2"))
			if pid == 0 {
				t.Fatalf("the grandchild wrote no pid: %v\n%s", p.Err, p.Stderr())
			}
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			if p.Code() != 0 {
				t.Fatalf("want run to exit 0 with its child: %v\n%s", p.Err, p.Stderr())
			}
			if procAlive(pid) {
				t.Errorf("run exited and released D while the child's daemonized grandchild (pid %d) still runs", pid)
			}
			if s := n.lhOK("status", "D"); strings.TrimSpace(s.stdout) != "D: free" {
				t.Errorf("after run exited, status D: %q, want free", s.stdout)
			}
		})
	}
}

func TestRunRefusesUnknownCgroupMode(t *testing.T) {
	n := startNode(t)
	r := n.lh("run", "C", "--cgroup", "yes", "--", "true")
	if r.code != 2 || !strings.Contains(r.stderr, `--cgroup "yes": want auto or off`) {
		t.Errorf("want exit 2 (usage) and a message naming --cgroup and its values: %s", r)
	}
	if s := n.lhOK("status", "C"); strings.TrimSpace(s.stdout) != "C: free" {
		t.Errorf("a refused run took C: %q", s.stdout)
	}
}
