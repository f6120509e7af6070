// Package watchdog is the dead man's switch between a lease and the process
// it protects (leasehold run, and later elect and groups run).
//
// The process that renews the lease (the supervisor) can be stopped, killed
// or OOM-killed; its timers then stop with it, and the child would run on
// without the lease. So the deadline lives in a second process, the
// watchdog: the same binary under a hidden subcommand, started by the
// supervisor in its own process group (a terminal's Ctrl-Z stops the
// supervisor, not the watchdog). The watchdog starts the command and holds
// the lease's local safe deadline on its own monotonic clock. The
// supervisor pushes the deadline forward over a pipe after each successful
// renewal, as an absolute CLOCK_MONOTONIC time (a message that sits unread
// in the pipe can only be early, never extend the deadline). When it is not
// pushed, the watchdog sends SIGTERM to the command's whole tree at
// deadline - grace - killMargin and SIGKILL at deadline - killMargin.
//
// The command's tree is its own cgroup v2 (created under the supervisor's,
// entered at clone time, killed with cgroup.kill), which also holds
// descendants that left the process group or daemonized; without a writable
// cgroup v2 it is the command's process group plus every descendant of the
// watchdog, which is a child subreaper so that orphans stay its descendants.
//
// Faults and who covers them:
//
//   - supervisor stopped: the watchdog's deadline passes (TERM, grace, KILL).
//   - supervisor killed: the watchdog reads EOF on the deadline pipe and stops
//     the tree at once: TERM, KILL after grace (never later than the
//     deadline - killMargin).
//   - watchdog killed: the command dies with it (Pdeathsig SIGKILL); the
//     supervisor sees the watchdog exit without a report and kills the rest
//     of the tree.
//   - watchdog stopped: the supervisor sees it (state T in /proc) within a
//     tick (TTL/30, 20ms to 250ms) and stops the tree itself, since nothing would stop it in time if
//     the supervisor stalled too.
//   - both stopped together, or the whole tree (a frozen cgroup, a paused
//     VM): not covered; the command is stopped too, and when it resumes
//     after the lease has passed on, only fencing tokens protect the
//     resource.
//
// Use (run is the model; elect and groups run are meant to do the same, and
// the binary registers Subcommand once, calling Main):
//
//	g, err := watchdog.Start(watchdog.Config{Path: path, Args: argv, Env: env,
//		Deadline: l.Deadline(), TTL: ttl, Grace: grace, KillMargin: killMargin})
//	o := watchdog.Supervise(l, g, signals) // until the command has ended
//	if g.Close(10 * time.Second) {         // its whole tree is gone:
//		l.Release(ctx)                     // only now may the lease go
//	}
package watchdog
