package watchdog

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Subcommand is the hidden subcommand of the leasehold binary that runs
// Main. It is not an interface for people: Start builds its arguments.
const Subcommand = "__watchdog"

// Why the watchdog stopped the command, as reported and shown to people.
const (
	whyDeadline   = "the lease's local deadline came with no renewal pushed"
	whySupervisor = "the supervisor exited or was killed"
)

// Main is the watchdog process: it starts the command given after "--",
// holds the deadlines the supervisor pushes on fd 3, reports on fd 4, and
// returns the process's exit status (0 once it reported the command's
// status). See the package documentation.
func Main(args []string) int {
	fs := flag.NewFlagSet(Subcommand, flag.ContinueOnError)
	grace := fs.Duration("grace", 0, "time between SIGTERM and SIGKILL")
	margin := fs.Duration("kill-margin", 0, "SIGKILL this long before the deadline")
	cgroup := fs.String("cgroup", "", "cgroup v2 directory for the command's tree (empty: process group)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) < 2 {
		fmt.Fprintln(os.Stderr, "leasehold watchdog: usage: __watchdog [flags] -- PATH ARGV0 [ARGS...]")
		return 2
	}
	// Not inherited by the command: only the watchdog may hold them.
	syscall.CloseOnExec(deadlineFD)
	syscall.CloseOnExec(reportFD)
	deadlines := os.NewFile(deadlineFD, "deadlines")
	reports := os.NewFile(reportFD, "reports")
	w := &watchdog{grace: *grace, margin: *margin, reports: reports}
	return w.run(deadlines, *cgroup, argv[0], argv[1:])
}

type watchdog struct {
	grace, margin time.Duration
	reports       io.Writer
}

func (w *watchdog) report(r report) {
	// The supervisor may be gone (EPIPE); the watchdog does its job anyway.
	writeReport(w.reports, r)
}

func (w *watchdog) run(deadlines *os.File, cgroup, path string, argv []string) int {
	// Pdeathsig fires when the thread that forked the command exits: fork
	// from the main thread, which lives as long as the process.
	runtime.LockOSThread()
	// Orphans of the command re-parent here, so they stay in reach
	// (without a cgroup, that is how the tree is found).
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "leasehold watchdog: PR_SET_CHILD_SUBREAPER:", err)
	}
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	// Caught, not ignored: the command starts with default handlers.
	// SIGINT and SIGTERM are passed on; SIGHUP (an orphaned process group)
	// must not end the watchdog before its command.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)

	deadline, err := readDeadline(deadlines)
	if err != nil {
		return 1 // the supervisor is gone before anything started
	}
	if !time.Now().Before(fromMono(deadline).Add(-w.grace - w.margin)) {
		w.report(report{Error: "the lease's local deadline came before the command could start"})
		return 1
	}
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if cgroup != "" {
		fd, err := syscall.Open(cgroup, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			w.report(report{Error: fmt.Sprintf("open cgroup %s: %v", cgroup, err)})
			return 1
		}
		defer syscall.Close(fd)
		attr.UseCgroupFD, attr.CgroupFD = true, fd // entered at clone: no moment outside it
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}, Sys: attr})
	if err != nil {
		w.report(report{Error: (&os.PathError{Op: "fork/exec", Path: path, Err: err}).Error()})
		return 1
	}
	w.report(report{Pid: pid})
	t := &tree{cgroup: cgroup, pgid: pid, root: os.Getpid()}

	pushed := make(chan int64)
	go func() {
		defer close(pushed)
		for {
			d, err := readDeadline(deadlines)
			if err != nil {
				return // EOF: the supervisor is gone
			}
			pushed <- d
		}
	}()

	var (
		stopping string // why the tree is being stopped; "" while it may run
		killAt   time.Time
		status   syscall.WaitStatus
	)
	term := time.NewTimer(time.Until(fromMono(deadline).Add(-w.grace - w.margin)))
	kill := time.NewTimer(time.Hour)
	kill.Stop()
	startStop := func(why string, at time.Time) {
		stopping, killAt = why, at
		term.Stop()
		t.signal(syscall.SIGTERM)
		kill.Reset(time.Until(killAt))
	}
wait:
	for {
		select {
		case d, ok := <-pushed:
			switch {
			case !ok:
				pushed = nil
				// Nobody renews now; the lease still holds until the
				// deadline, so the command gets its grace within it.
				if stopping == "" {
					startStop(whySupervisor, minTime(time.Now().Add(w.grace), fromMono(deadline).Add(-w.margin)))
				} else if now := time.Now(); now.Add(w.grace).Before(killAt) {
					killAt = now.Add(w.grace)
					kill.Reset(time.Until(killAt))
				}
			case stopping == "":
				// Once SIGTERM is sent it is not taken back.
				deadline = d
				term.Reset(time.Until(fromMono(deadline).Add(-w.grace - w.margin)))
			}
		case <-term.C:
			startStop(whyDeadline, fromMono(deadline).Add(-w.margin))
		case <-kill.C:
			t.kill()
		case s := <-sigs:
			if s != syscall.SIGHUP {
				syscall.Kill(-pid, s.(syscall.Signal))
			}
		case <-sigchld:
			if reaped(pid, &status) {
				break wait
			}
		}
	}
	// Nothing the command left running may outlive it: the supervisor
	// releases the lease once this report arrives.
	t.kill()
	gone := t.waitEmpty(10 * time.Second)
	if !gone {
		fmt.Fprintf(os.Stderr, "leasehold watchdog: processes of the command's tree still run 10s after SIGKILL\n")
	}
	reaped(-1, nil) // orphans of the command, now dead
	t.remove()
	w.report(report{Status: statusOf(status), Stopped: stopping, Gone: gone})
	return 0
}

// reaped reaps every child that has exited (orphans of the command
// included) and reports whether pid was among them, with its status. With
// pid -1 it reports whether any child was reaped.
func reaped(pid int, status *syscall.WaitStatus) bool {
	found := false
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || p <= 0 {
			return found
		}
		if pid == -1 || p == pid {
			found = true
			if status != nil {
				*status = ws
			}
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
