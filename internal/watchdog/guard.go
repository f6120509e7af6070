package watchdog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Config is what Start needs to run a command under a watchdog.
type Config struct {
	Path string   // the command's executable, resolved
	Args []string // its argv, Args[0] included
	Env  []string // its environment (the watchdog's too)
	// Deadline is the lease's local safe deadline now; Push moves it.
	Deadline time.Time
	// TTL is the lease's time to live; the supervisor looks for renewals
	// and for a stopped watchdog every TTL/30 (20ms to 250ms).
	TTL time.Duration
	// Grace is the time between SIGTERM and SIGKILL; KillMargin how long
	// before the deadline SIGKILL is sent.
	Grace, KillMargin time.Duration
	// NoCgroup keeps the tree in a process group even where a cgroup v2
	// could be created.
	NoCgroup bool
}

// Guard is the supervisor's side of a running watchdog. Its methods are
// for one goroutine (the supervisor's loop), except Finished.
type Guard struct {
	cfg       Config
	cmd       *exec.Cmd // the watchdog
	deadlines *os.File  // write end of its deadline pipe
	tree      *tree
	childPid  int
	cgroupErr error // why there is no cgroup, if there is none

	finished chan struct{} // closed once the watchdog is reaped and its reports read
	final    *report       // its last report, if it made one
	waitErr  error         // the watchdog's own exit
}

// Start starts the watchdog, which starts the command; it returns once the
// command runs (or could not start). The command's stdio is the caller's.
func Start(cfg Config) (*Guard, error) {
	g := &Guard{cfg: cfg, finished: make(chan struct{})}
	cgroup := ""
	if cfg.NoCgroup {
		g.cgroupErr = errors.New("disabled")
	} else if cgroup, g.cgroupErr = newCgroup(); g.cgroupErr != nil {
		cgroup = ""
	}
	if cgroup == "" {
		// If the watchdog dies, the command's orphans come here, where
		// the fallback's descendant walk still finds them.
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	g.tree = &tree{cgroup: cgroup, root: os.Getpid()}
	fail := func(err error) (*Guard, error) {
		g.tree.remove()
		return nil, err
	}

	dlR, dlW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		dlR.Close()
		dlW.Close()
		return fail(err)
	}
	args := []string{Subcommand,
		"--grace", cfg.Grace.String(), "--kill-margin", cfg.KillMargin.String(), "--cgroup", cgroup,
		"--", cfg.Path}
	g.cmd = exec.Command("/proc/self/exe", append(args, cfg.Args...)...)
	g.cmd.Args[0] = os.Args[0]
	g.cmd.Stdin, g.cmd.Stdout, g.cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	g.cmd.Env = cfg.Env
	g.cmd.ExtraFiles = []*os.File{dlR, repW} // fds 3 and 4
	// Its own process group: a terminal's Ctrl-Z or Ctrl-C reaches the
	// supervisor, never the watchdog. No Pdeathsig: it must outlive us.
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = g.cmd.Start()
	dlR.Close()
	repW.Close()
	if err != nil {
		dlW.Close()
		repR.Close()
		return fail(fmt.Errorf("start the watchdog: %w", err))
	}
	g.deadlines = dlW
	g.tree.skip = g.cmd.Process.Pid
	writeDeadline(dlW, toMono(cfg.Deadline))

	reports := bufio.NewReader(repR)
	first, err := readReport(reports)
	if err != nil || first.Pid == 0 {
		dlW.Close()
		g.cmd.Wait()
		repR.Close()
		g.tree.remove()
		if err == nil {
			err = errors.New(first.Error)
		}
		return nil, err
	}
	g.childPid = first.Pid
	g.tree.pgid = first.Pid
	go g.watch(reports, repR)
	return g, nil
}

func readReport(r *bufio.Reader) (report, error) {
	var rep report
	line, err := r.ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return rep, errors.New("the watchdog exited before it started the command")
		}
		return rep, err
	}
	if err := json.Unmarshal(line, &rep); err != nil {
		return rep, fmt.Errorf("the watchdog's report %q: %w", line, err)
	}
	return rep, nil
}

// watch reads the watchdog's reports to their end and reaps it.
func (g *Guard) watch(r *bufio.Reader, f *os.File) {
	defer close(g.finished)
	for {
		rep, err := readReport(r)
		if err != nil {
			break
		}
		if rep.Status != nil {
			g.final = &rep
		}
	}
	f.Close()
	g.waitErr = g.cmd.Wait()
}

// Mechanism says, for people, how the command's tree is held.
func (g *Guard) Mechanism() string {
	if g.tree.cgroup != "" {
		return "cgroup " + g.tree.cgroup
	}
	return fmt.Sprintf("process group %d, no cgroup (%v)", g.childPid, g.cgroupErr)
}

// WatchdogPid and ChildPid are the watchdog's and the command's pids.
func (g *Guard) WatchdogPid() int { return g.cmd.Process.Pid }
func (g *Guard) ChildPid() int    { return g.childPid }

// Push hands the watchdog a new local safe deadline, after a renewal.
func (g *Guard) Push(deadline time.Time) error {
	// A pipe nobody reads fills up; never let that block the supervisor.
	g.deadlines.SetWriteDeadline(time.Now().Add(time.Second))
	return writeDeadline(g.deadlines, toMono(deadline))
}

// Signal passes sig on to the command's process group.
func (g *Guard) Signal(sig syscall.Signal) { syscall.Kill(-g.childPid, sig) }

// Finished is closed once the watchdog has exited.
func (g *Guard) Finished() <-chan struct{} { return g.finished }

// watchdogStopped reports whether the watchdog is stopped (and so cannot
// keep its deadline).
func (g *Guard) watchdogStopped() bool { return stoppedProc(g.cmd.Process.Pid) }

// Close makes sure nothing of the command's tree runs, ends the watchdog
// and removes the cgroup. It reports false if processes of the tree still
// ran after timeout (say, in an uninterruptible sleep): then the lease must
// not be released early.
func (g *Guard) Close(timeout time.Duration) bool {
	select {
	case <-g.finished:
		if g.final != nil && g.final.Gone {
			// The watchdog saw the tree gone; a kill now could only hit
			// a process group whose id was reused since.
			g.deadlines.Close()
			g.tree.remove()
			return true
		}
	default:
	}
	g.tree.kill()
	empty := g.tree.waitEmpty(timeout)
	g.deadlines.Close()
	select {
	case <-g.finished:
	default:
		g.cmd.Process.Kill()
		<-g.finished
	}
	g.tree.remove()
	return empty
}

// reportedStatus is the command's wait status as the watchdog reported it,
// and why the watchdog stopped it, if it did; ok is false if the watchdog
// ended without a report (it was killed).
func (g *Guard) reportedStatus() (ws syscall.WaitStatus, stopped string, ok bool) {
	if g.final == nil {
		return 0, "", false
	}
	return syscall.WaitStatus(*g.final.Status), g.final.Stopped, true
}

func (g *Guard) watchdogExit() string {
	if g.waitErr == nil {
		return "exited without a report"
	}
	return g.waitErr.Error()
}
