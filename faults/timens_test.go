package faults

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testutil"
)

// timeNS is the command prefix that runs a process in a new Linux time
// namespace whose CLOCK_MONOTONIC and CLOCK_BOOTTIME read offset more than
// the host's; unshare's child dies with it (--kill-child).
func timeNS(offset time.Duration) []string {
	s := strconv.FormatInt(int64(offset/time.Second), 10)
	return []string{"unshare", "--time", "--monotonic", s, "--boottime", s, "--kill-child", "--"}
}

// timeNSChild is the pid of the process unshare runs, once it runs.
func timeNSChild(p *proc) (int, error) {
	var pid int
	err := checkFor(10*time.Second, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.Pid(), p.Pid()))
		if err != nil {
			return err
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			pid, err = strconv.Atoi(f[0])
			return err
		}
		return fmt.Errorf("unshare (pid %d) has no child yet", p.Pid())
	})
	return pid, err
}

// TestClockSkewMonotonicOffset runs a node and client processes in Linux
// time namespaces whose monotonic clocks are offset from the host's: the
// node +10 days, then, after a restart, far back (up to an hour, as far
// as the host's uptime allows); clients in other offsets. Go's runtime
// reads CLOCK_MONOTONIC, so each process's clock really is offset, and
// leasehold never compares a monotonic reading across processes nor keeps
// one on disk: leases run out on time as the test's own clock measures,
// a renewing holder keeps its lease, tokens grow, and across the restart
// in another offset every lease's countdown stays within its TTL. A time
// namespace cannot change a clock's rate: cluster.TestClockSkewRates
// covers rates with an injected clock.
func TestClockSkewMonotonicOffset(t *testing.T) {
	if out, err := exec.Command(timeNS(time.Hour)[0], append(timeNS(time.Hour)[1:], "true")...).CombinedOutput(); err != nil {
		t.Skipf("no time namespaces here (unshare --time needs root and Linux 5.6): %v: %s", err, out)
	}
	const ahead = 10 * 24 * time.Hour
	// A namespace's clock may not go below zero: go back as far as the
	// host's uptime allows, at most an hour.
	behind := -min(time.Hour, time.Duration(monoNow())-2*time.Minute).Truncate(time.Second)
	if behind >= 0 {
		t.Fatalf("the host has been up %v: too short to set a clock back", time.Duration(monoNow()))
	}
	n := newNode(t, "n1", "")
	n.wrap = timeNS(ahead)
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	checkOffset(t, n.p, ahead)
	c := newClient(t, "", n.url)
	h := &history{}
	ctx := testutil.Context(t, 2*time.Minute)
	const ttl = 2 * time.Second

	// A client process set back: its lease runs out on time.
	const r = "timens/expiry"
	back := startClientProc(t, r, []string{n.url}, clientOpts{TTL: ttl, Work: "hold", ManualRenew: true}, timeNS(behind)...)
	renewing := startClientProc(t, "timens/renewing", []string{n.url}, clientOpts{TTL: ttl, Work: "worker"}, timeNS(3*ahead)...)
	if err := back.waitOutput(progressTimeout, "been granted", func(o clientOutput) bool { return o.token != 0 }); err != nil {
		t.Fatal(err)
	}
	checkOffset(t, back.proc, behind)
	o := back.output()
	h.granted(r, o.leaseID, o.token)
	next, err := c.Acquire(ctx, r, client.TTL(time.Minute), client.Wait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	grantedAt := monoNow()
	h.granted(r, next.ID(), next.Token())
	// The client's events are on its own clock, behind the host's by
	// exactly -behind: put them on the test's.
	heldFrom := o.events[0].mono - int64(behind)
	if lived := time.Duration(grantedAt - heldFrom); lived < ttl*9/10 || lived > ttl+time.Second {
		t.Errorf("a %v lease of a client %v back lived %v on the node %v ahead", ttl, -behind, lived, ahead)
	}
	if err := back.waitOutput(progressTimeout, "seen its lease end", func(o clientOutput) bool { return o.lost != nil }); err != nil {
		t.Fatal(err)
	}
	lostAt := back.output().lost.mono - int64(behind)
	if believed := time.Duration(lostAt - heldFrom); believed < ttl*9/10 || lostAt > grantedAt {
		t.Errorf("the client believed it held %s for %v (TTL %v), until %v after the next grant",
			r, believed, ttl, time.Duration(lostAt-grantedAt))
	}
	next.Release(ctx)

	// A lease whose holder died, across a restart of the node in another
	// offset: the countdown restarts, within its TTL.
	const kept = "timens/kept"
	dead := startClientProc(t, kept, []string{n.url}, clientOpts{TTL: ttl, Work: "hold", ManualRenew: true}, timeNS(behind)...)
	if err := dead.waitOutput(progressTimeout, "been granted", func(o clientOutput) bool { return o.token != 0 }); err != nil {
		t.Fatal(err)
	}
	dead.Kill()
	od := dead.output()
	h.granted(kept, od.leaseID, od.token)
	killedAt := monoNow()
	killTimeNS(t, n.p)
	restarted := time.Now()
	n.wrap = timeNS(behind)
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	checkOffset(t, n.p, behind)
	locks, err := c.Locks(ctx, client.LocksQuery{Resource: kept})
	if err != nil || len(locks) != 1 || locks[0].Holder == nil || locks[0].Holder.ID != od.leaseID {
		t.Fatalf("%s after the restart: %v %+v, want still held by lease %d", kept, err, locks, od.leaseID)
	}
	if d := locks[0].Holder.ExpiresIn; !locks[0].Holder.ExpiresKnown || d <= 0 || d > ttl {
		t.Errorf("after a restart %v back, %s expires in %v (known %v), want within its TTL %v",
			ahead-behind, kept, d, locks[0].Holder.ExpiresKnown, ttl)
	}
	again, err := c.Acquire(ctx, kept, client.TTL(time.Minute), client.Wait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	h.granted(kept, again.ID(), again.Token())
	if lived := time.Since(restarted); lived < ttl || lived > ttl+readyTimeout {
		t.Errorf("the lease ended %v after the restart began, want its TTL %v after the takeover", lived, ttl)
	}
	again.Release(ctx)

	// The renewing client, 30 days ahead, kept its lease until the node
	// was killed (the restart may outlast its deadline); its writes were
	// fenced throughout.
	ro := renewing.output()
	if ro.lost != nil && ro.lost.mono-int64(3*ahead) < killedAt {
		t.Errorf("the renewing client %v ahead lost its lease (%s) before the restart", 3*ahead, ro.lost.args[0])
	}
	h.granted("timens/renewing", ro.leaseID, ro.token)
	for _, w := range ro.acks {
		h.wrote(w)
	}
	if len(ro.acks) < 10 {
		t.Errorf("the client %v ahead had only %d writes acknowledged", 3*ahead, len(ro.acks))
	}
	renewing.Kill()
	finish(t, "clock-monotonic-offset", h, c, expect{}, nil)
}

// checkOffset checks that the process unshare runs for p lives in a time
// namespace offset by want.
func checkOffset(t *testing.T, p *proc, want time.Duration) {
	t.Helper()
	pid, err := timeNSChild(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/timens_offsets", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "monotonic" {
			if f[1] != strconv.FormatInt(int64(want/time.Second), 10) {
				t.Fatalf("process %d's monotonic clock is offset %ss, want %v", pid, f[1], want)
			}
			return
		}
	}
	t.Fatalf("process %d's time namespace offsets %q name no monotonic clock", pid, b)
}

// killTimeNS SIGKILLs unshare and waits for its child (killed with it) to
// be gone, so a restart finds the data dir and the ports free.
func killTimeNS(t *testing.T, p *proc) {
	t.Helper()
	pid, err := timeNSChild(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	err = checkFor(10*time.Second, func() error {
		// Gone, or dead and not yet reaped (its parent, unshare, is gone).
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if _, after, ok := strings.Cut(string(b), ") "); err == nil && ok && !strings.HasPrefix(after, "Z") {
			return fmt.Errorf("process %d still runs", pid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
