package watchdog

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// tickFor is how often the supervisor looks for a renewed deadline to push
// and for a stopped watchdog: a thirtieth of the TTL, from 20ms to 250ms
// (each look costs a read of /proc; at 50ms they were 7ms of CPU a second).
// A push a tick late is only earlier than the truth; renewals come at a
// third of the TTL, long before the deadline.
func tickFor(ttl time.Duration) time.Duration {
	return min(250*time.Millisecond, max(20*time.Millisecond, ttl/30))
}

// Lease is what Supervise needs of a lease (a *client.Lease has it).
type Lease interface {
	// Deadline is the local safe deadline; it moves with each renewal.
	Deadline() time.Time
	// Done is closed when the lease ends.
	Done() <-chan struct{}
}

// Outcome is how a supervised command ended.
type Outcome struct {
	// Status is the command's wait status, when known (HasStatus).
	Status    syscall.WaitStatus
	HasStatus bool
	// Stopped says why the command was stopped, if it was stopped by the
	// watchdog or the supervisor rather than ending by itself.
	Stopped string
	// LeaseLost: it was stopped because the lease ended or was about to
	// (rather than because the watchdog failed).
	LeaseLost bool
}

// Supervise runs until the command under g has ended (or was stopped): it
// pushes each renewed deadline to the watchdog, passes signals on to the
// command's process group, and is the backstop for a watchdog that cannot
// act: killed (it returns at once, and Close kills the rest of the tree),
// stopped (it stops the tree itself), or late (SIGKILL at deadline -
// killMargin in any case). A lease that ends kills the tree at once. Call
// Close afterwards, and release the lease only if it reports the tree gone.
func Supervise(l Lease, g *Guard, signals <-chan os.Signal) Outcome {
	grace, margin := g.cfg.Grace, g.cfg.KillMargin
	deadline := g.cfg.Deadline
	ticker := time.NewTicker(tickFor(g.cfg.TTL))
	defer ticker.Stop()
	term := time.NewTimer(time.Until(deadline.Add(-grace - margin)))
	defer term.Stop()
	var kill <-chan time.Time // set once the deadline passed without renewal
	leaseDone := l.Done()
	stopped, leaseLost := "", false

	// renewed pushes a deadline that moved.
	renewed := func() bool {
		d := l.Deadline()
		if !d.After(deadline) || kill != nil {
			return false
		}
		deadline = d
		g.Push(deadline)
		term.Reset(time.Until(deadline.Add(-grace - margin)))
		return true
	}
	for {
		select {
		case <-g.Finished():
			o := g.outcome(stopped)
			o.LeaseLost = o.LeaseLost || leaseLost
			return o
		case s := <-signals:
			g.Signal(s.(syscall.Signal))
		case <-leaseDone:
			leaseDone = nil
			if stopped == "" {
				stopped, leaseLost = "the lease ended", true
			}
			g.tree.kill()
		case <-ticker.C:
			renewed()
			if g.watchdogStopped() {
				return g.stopUnguarded(deadline, stopped, leaseLost)
			}
		case <-term.C:
			if renewed() {
				continue
			}
			// The watchdog sends SIGTERM now; if it cannot, we do.
			if g.watchdogStopped() {
				return g.stopUnguarded(deadline, stopped, leaseLost)
			}
			if stopped == "" {
				stopped, leaseLost = "no renewal succeeded before the lease's local deadline", true
			}
			kill = time.After(time.Until(deadline.Add(-margin)))
		case <-kill:
			g.tree.kill() // the backstop, should the watchdog be late
		}
	}
}

// stopUnguarded stops the tree when the watchdog is stopped and cannot:
// SIGTERM, SIGKILL after grace and before the deadline; then it kills the
// watchdog, which would otherwise act on a stale deadline when continued.
func (g *Guard) stopUnguarded(deadline time.Time, stopped string, leaseLost bool) Outcome {
	if stopped == "" {
		stopped = fmt.Sprintf("the watchdog (pid %d) was stopped, so nothing would stop the command in time if run stalled too", g.WatchdogPid())
	}
	killAt := minTime(time.Now().Add(g.cfg.Grace), deadline.Add(-g.cfg.KillMargin))
	g.tree.signal(syscall.SIGTERM)
	g.tree.waitEmpty(time.Until(killAt))
	g.tree.kill()
	g.cmd.Process.Kill()
	<-g.finished
	return Outcome{Stopped: stopped, LeaseLost: leaseLost}
}

// outcome is how the command ended, once the watchdog has exited.
func (g *Guard) outcome(stopped string) Outcome {
	ws, why, ok := g.reportedStatus()
	if !ok {
		// Killed: the command died with it (Pdeathsig); Close kills the
		// rest of its tree.
		if stopped == "" {
			stopped = fmt.Sprintf("the watchdog (pid %d) ended without a report (%s)", g.WatchdogPid(), g.watchdogExit())
		}
		return Outcome{Stopped: stopped}
	}
	if stopped == "" {
		stopped = why
	}
	return Outcome{Status: ws, HasStatus: true, Stopped: stopped, LeaseLost: why == whyDeadline}
}

// ExitCode is the shell's view of the command's status: its exit code, or
// 128 + the signal that killed it.
func (o Outcome) ExitCode() int {
	switch {
	case !o.HasStatus:
		return -1
	case o.Status.Signaled():
		return 128 + int(o.Status.Signal())
	default:
		return o.Status.ExitStatus()
	}
}
