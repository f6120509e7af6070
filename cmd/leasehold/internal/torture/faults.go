package torture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// faultRecord is one injected fault (or one run of --fault-cmd).
type faultRecord struct {
	Phase  int    `json:"phase"`
	Class  string `json:"class"`
	Target string `json:"target,omitempty"`
	What   string `json:"what"`
	Start  int64  `json:"start_ns"`
	End    int64  `json:"end_ns"`
	Exit   *int   `json:"exit,omitempty"` // --fault-cmd's status
	Output string `json:"output,omitempty"`
	Err    string `json:"err,omitempty"`
}

// faultLoop runs phases until ctx ends: half of FaultEvery of quiet load,
// then a fault of the next class held for up to the other half, then healed.
func (r *run) faultLoop(ctx context.Context) {
	var classes []string
	for _, f := range r.cfg.Faults {
		if f != FaultNone {
			classes = append(classes, f)
		}
	}
	if len(classes) == 0 && r.cfg.FaultCmd == "" {
		return
	}
	for phase := 0; sleep(ctx, r.cfg.FaultEvery/2); phase++ {
		if r.cfg.FaultCmd != "" {
			r.runFaultCmd(ctx, phase)
			continue
		}
		class := classes[phase%len(classes)]
		// Leader and follower take turns within each class.
		r.inject(ctx, phase, class, (phase/len(classes))%2 == 0)
	}
}

// runFaultCmd runs the user's command once, recording its status and
// output (the end of it).
func (r *run) runFaultCmd(ctx context.Context, phase int) {
	f := faultRecord{Phase: phase, Class: "cmd", What: r.cfg.FaultCmd, Start: r.rec.now()}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "sh", "-c", r.cfg.FaultCmd)
	cmd.Env = append(os.Environ(), "LEASEHOLD_TORTURE_PHASE="+strconv.Itoa(phase),
		"LEASEHOLD_ENDPOINTS="+strings.Join(r.endpoints, ","), "LEASEHOLD_TORTURE_PREFIX="+r.cfg.Prefix)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	f.End = r.rec.now()
	code := cmd.ProcessState.ExitCode()
	f.Exit = &code
	f.Output = tail(out.String(), 2000)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		f.Err = err.Error()
	}
	r.recordFault(f)
	r.logf("phase %d: fault command exited %d", phase, code)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// inject applies one fault of class to the local cluster (its leader, or
// a follower), holds it, heals it and records it.
func (r *run) inject(ctx context.Context, phase int, class string, leader bool) {
	lc := r.local
	target, err := lc.waitLeader(ctx, 30*time.Second)
	if err != nil {
		r.recordFault(faultRecord{Phase: phase, Class: class, What: "no leader to aim at", Start: r.rec.now(), End: r.rec.now(), Err: err.Error()})
		return
	}
	role := "leader"
	if !leader {
		role = "follower"
		for _, nd := range lc.nodes {
			if nd != target && nd.running() {
				target = nd
				break
			}
		}
	}
	hold := r.cfg.FaultEvery / 2
	f := faultRecord{Phase: phase, Class: class, Target: target.ID + " (" + role + ")", Start: r.rec.now()}
	switch class {
	case FaultPause:
		f.What = fmt.Sprintf("SIGSTOP %s for %v, then SIGCONT", target.ID, hold)
		err = target.signal(syscall.SIGSTOP)
		sleep(context.WithoutCancel(ctx), hold)
		if cerr := target.signal(syscall.SIGCONT); err == nil {
			err = cerr
		}
	case FaultKill:
		f.What = fmt.Sprintf("SIGKILL %s, restart after %v", target.ID, hold/2)
		err = target.kill()
		sleep(context.WithoutCancel(ctx), hold/2)
		if rerr := lc.restart(context.WithoutCancel(ctx), target); err == nil {
			err = rerr
		}
	case FaultSkew:
		err = r.moveLeader(ctx, &f)
		sleep(context.WithoutCancel(ctx), hold) // the new leader's clock rules the leases for a while
	case FaultPartition:
		err = r.partition(ctx, &f, target, hold)
	}
	f.End = r.rec.now()
	if err != nil {
		f.Err = err.Error()
	}
	r.recordFault(f)
	r.logf("phase %d: %s: %s%s", phase, class, f.What, errSuffix(err))
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

// moveLeader hands leadership to a node whose clock runs at another rate
// than the leader's (the nodes of a skew run run at 1, 1+s and 1-s).
func (r *run) moveLeader(ctx context.Context, f *faultRecord) error {
	lc := r.local
	old, err := lc.waitLeader(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	var to *localNode
	for _, nd := range lc.nodes {
		if nd != old && nd.rate != old.rate && (to == nil || abs(nd.rate-old.rate) > abs(to.rate-old.rate)) {
			to = nd
		}
	}
	if to == nil {
		return fmt.Errorf("no node on another clock rate than %s", old.ID)
	}
	f.Target = old.ID
	f.What = fmt.Sprintf("leadership from %s (clock rate %v) to %s (clock rate %v), kept there half a phase", old.ID, old.rate, to.ID, to.rate)
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return lc.status.TransferLeader(tctx, to.ID)
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func (r *run) recordFault(f faultRecord) {
	r.rec.fault(f)
	r.rec.add(Op{Prim: primFault, Op: f.Class, Key: f.Target, Invoke: f.Start, Return: f.End, Result: resultOK,
		In: map[string]any{"what": f.What}, Err: f.Err})
}
