package watchdog

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// tree is the command and everything it started. With a cgroup, it is the
// cgroup's processes; without, the command's process group plus every
// descendant of root (except skip).
type tree struct {
	cgroup string // cgroup v2 directory, "" for the process-group fallback
	pgid   int    // the command's process group (its pid)
	root   int    // fallback: descendants of root belong to the tree...
	skip   int    // ...except skip (the watchdog itself, seen from the supervisor)
}

// signal sends sig to every process of the tree.
func (t *tree) signal(sig syscall.Signal) {
	syscall.Kill(-t.pgid, sig)
	for _, pid := range t.members() {
		syscall.Kill(pid, sig)
	}
}

// kill sends SIGKILL to the whole tree; with a cgroup, the kernel does it
// in one step that no fork can escape.
func (t *tree) kill() {
	if t.cgroup != "" {
		os.WriteFile(filepath.Join(t.cgroup, "cgroup.kill"), []byte("1"), 0)
	}
	t.signal(syscall.SIGKILL)
}

// alive reports whether any process of the tree still runs (zombies do not).
func (t *tree) alive() bool {
	if t.cgroup != "" {
		b, err := os.ReadFile(filepath.Join(t.cgroup, "cgroup.events"))
		if errors.Is(err, os.ErrNotExist) {
			return false // removed, which the kernel allows only when empty
		}
		if err == nil {
			return !strings.Contains(string(b), "populated 0")
		}
	}
	return len(t.members()) > 0 || groupAlive(t.pgid)
}

// waitEmpty polls until no process of the tree runs, up to timeout.
func (t *tree) waitEmpty(timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(5 * time.Millisecond) {
		if !t.alive() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// remove deletes the cgroup once it is empty (rmdir fails while it is not).
func (t *tree) remove() {
	if t.cgroup == "" {
		return
	}
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := syscall.Rmdir(t.cgroup)
		if err == nil || errors.Is(err, syscall.ENOENT) || time.Now().After(deadline) {
			return
		}
	}
}

// members lists the tree's live processes.
func (t *tree) members() []int {
	if t.cgroup != "" {
		b, err := os.ReadFile(filepath.Join(t.cgroup, "cgroup.procs"))
		if err == nil {
			var pids []int
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return pids
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	procs := scanProcs()
	children := map[int][]int{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	live := map[int]bool{}
	for _, p := range procs {
		live[p.pid] = p.live
	}
	var out []int
	seen := map[int]bool{t.root: true}
	queue := append([]int(nil), children[t.root]...)
	for _, p := range procs {
		if p.pgrp == t.pgid {
			queue = append(queue, p.pid)
		}
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if live[pid] && pid != t.skip { // skip's descendants are the tree's, though
			out = append(out, pid)
		}
		queue = append(queue, children[pid]...)
	}
	return out
}

type procInfo struct {
	pid, ppid, pgrp int
	live            bool // neither zombie nor dead
}

// scanProcs reads every process's parent, group and state from /proc.
func scanProcs() []procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, ppid, pgrp, ok := procStat(pid)
		if !ok {
			continue // gone meanwhile
		}
		out = append(out, procInfo{pid: pid, ppid: ppid, pgrp: pgrp, live: state != 'Z' && state != 'X'})
	}
	return out
}

// procStat reads a process's state, parent and process group.
func procStat(pid int) (state byte, ppid, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(s[i+1:]) // state ppid pgrp ...
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	pgrp, _ = strconv.Atoi(f[2])
	return f[0][0], ppid, pgrp, true
}

// groupAlive reports whether a live process is in process group pgid.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	for _, p := range scanProcs() {
		if p.pgrp == pgid && p.live {
			return true
		}
	}
	return false
}

// stoppedProc reports whether pid is stopped (SIGSTOP, SIGTSTP, a tracer).
func stoppedProc(pid int) bool {
	state, _, _, ok := procStat(pid)
	return ok && (state == 'T' || state == 't')
}
