package faults

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// progressTimeout bounds how long the service may take to acknowledge
// writes again after a fault (a new election, a restart) on a loaded
// machine.
const progressTimeout = 45 * time.Second

// TestProcessFaults pauses and kills the leader, a follower and a client
// process of a 3-node cluster under load.
func TestProcessFaults(t *testing.T) {
	nodes := startCluster(t, 3)
	c := newClient(t, "", urls(nodes)...)
	onNode := func(toLeader bool, act nodeAction) scenarioFunc {
		return func(t *testing.T, nodes []*node, c *client.Client, h *history, prefix string) error {
			return nodeFault(t, nodes, c, h, prefix, toLeader, act)
		}
	}
	for _, sc := range []struct {
		name string
		run  scenarioFunc
	}{
		{"leader-pause", onNode(true, pause)},
		{"leader-kill", onNode(true, killRestart)},
		{"follower-pause", onNode(false, pause)},
		{"follower-kill", onNode(false, killRestart)},
		{"client-pause", clientPause},
		{"client-kill", clientKill},
	} {
		t.Run(sc.name, func(t *testing.T) {
			h := &history{}
			prefix := "faults/" + sc.name
			err := sc.run(t, nodes, c, h, prefix)
			if err == nil {
				h.nextPhase()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err = regrant(ctx, c, h, prefix)
				cancel()
			}
			finish(t, sc.name, h, c, expect{}, err)
		})
	}
}

// A scenarioFunc injects its faults into the cluster under load, recording
// what was acknowledged in h; it returns why it could not finish, if so.
type scenarioFunc func(t *testing.T, nodes []*node, c *client.Client, h *history, prefix string) error

// leader finds the node that leads now (asking any node).
func leader(nodes []*node, c *client.Client) (*node, error) {
	var found *node
	err := checkFor(progressTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		m, err := c.Members(ctx)
		if err != nil {
			return err
		}
		for _, s := range m {
			for _, n := range nodes {
				if s.Leader && s.ID == n.id {
					found = n
					return nil
				}
			}
		}
		return fmt.Errorf("no leader among %v", m)
	})
	return found, err
}

// A nodeAction is a fault done to one node while load runs; it returns
// once the node is healed (woken, restarted).
type nodeAction func(n *node, w *workload) error

// pauseFor is how long a node stays stopped: many election timeouts
// (500ms), so a paused leader is deposed while it sleeps.
var pauseFor = time.Duration(rounds(2, 6)) * time.Second

// pause stops the node (SIGSTOP) for pauseFor, checks the others keep
// acknowledging writes meanwhile, and wakes it.
func pause(n *node, w *workload) error {
	if err := n.p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	until := time.Now().Add(pauseFor)
	err := w.waitAcks(3, progressTimeout)
	time.Sleep(time.Until(until)) // the fault's length, not a wait for an event
	if e := n.p.Signal(syscall.SIGCONT); e != nil {
		return e
	}
	if err != nil {
		return fmt.Errorf("while %s was paused: %w", n.id, err)
	}
	return nil
}

// killRestart SIGKILLs the node, checks the others keep acknowledging
// writes, and starts it again on its data dir.
func killRestart(n *node, w *workload) error {
	if err := n.p.Kill(); err != nil {
		return err
	}
	if err := w.waitAcks(3, progressTimeout); err != nil {
		return fmt.Errorf("while %s was down: %w", n.id, err)
	}
	if err := n.start(); err != nil {
		return fmt.Errorf("restart %s: %w", n.id, err)
	}
	return nil
}

// nodeFault runs load, does act to the leader (or a follower), and checks
// the cluster acknowledges writes again afterwards.
func nodeFault(t *testing.T, nodes []*node, c *client.Client, h *history, prefix string, toLeader bool, act nodeAction) error {
	w := startWorkload(c, h, prefix, 3)
	defer w.stop()
	if err := w.waitAcks(6, progressTimeout); err != nil {
		return fmt.Errorf("before the fault: %w", err)
	}
	for round := range rounds(1, 4) {
		l, err := leader(nodes, c)
		if err != nil {
			return err
		}
		target := l
		if !toLeader {
			for _, n := range nodes {
				if n != l {
					target = n
					break
				}
			}
		}
		t.Logf("round %d: fault on %s (leader %s)", round+1, target.id, l.id)
		if err := act(target, w); err != nil {
			return err
		}
		if err := w.waitAcks(6, progressTimeout); err != nil {
			return fmt.Errorf("after the fault on %s: %w", target.id, err)
		}
	}
	return nil
}

// startWritingClient starts a client process that holds resource, and
// waits until it has been granted it and has written 3 times.
func startWritingClient(t *testing.T, resource string, nodes []*node, opts clientOpts) (*clientProc, error) {
	cp := startClientProc(t, resource, urls(nodes), opts)
	if err := cp.waitOutput(progressTimeout, "been granted and written 3 times", func(o clientOutput) bool {
		return o.token != 0 && len(o.acks) >= 3
	}); err != nil {
		return nil, err
	}
	return cp, nil
}

// clientPause stops a client process that holds a lease until the lease
// expires and another holder takes the resource, then wakes it: the
// writes it goes on sending with its old token must all be refused.
func clientPause(t *testing.T, nodes []*node, c *client.Client, h *history, prefix string) error {
	for round := range rounds(1, 4) {
		resource := fmt.Sprintf("%s/r%d", prefix, round)
		cp, err := startWritingClient(t, resource, nodes, clientOpts{})
		if err != nil {
			return err
		}
		o := cp.output()
		h.granted(resource, o.leaseID, o.token)
		if err := cp.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		// The paused holder stops renewing; once its lease expires the
		// next holder gets the resource.
		ctx, cancel := context.WithTimeout(context.Background(), progressTimeout)
		l, err := c.Acquire(ctx, resource, client.TTL(workloadTTL), client.Wait(progressTimeout-5*time.Second))
		cancel()
		if err != nil {
			cp.Signal(syscall.SIGCONT)
			return fmt.Errorf("acquire %s from the paused holder: %w", resource, err)
		}
		h.granted(resource, l.ID(), l.Token())
		ctx, cancel = context.WithTimeout(context.Background(), progressTimeout)
		err = retryUnavailable(ctx, func(ctx context.Context) error {
			return putFenced(ctx, c, h, resource+"/new-holder", []byte("new holder"), resource, l.Token())
		})
		cancel()
		if err != nil {
			return fmt.Errorf("the new holder's write: %w", err)
		}
		before := cp.output()
		if err := cp.Signal(syscall.SIGCONT); err != nil {
			return err
		}
		err = cp.waitOutput(progressTimeout, "written 3 more times after waking", func(o clientOutput) bool {
			return len(o.acks)+o.refused >= len(before.acks)+before.refused+3
		})
		cp.Kill()
		for _, w := range cp.output().acks {
			h.wrote(w) // a write applied after the new grant counts as stale
		}
		l.Release(context.Background())
		if err != nil {
			return err
		}
	}
	return nil
}

// clientKill SIGKILLs a client process that holds a lease: its lease
// expires, the next holder's token is higher, and every write it was told
// was done is there.
func clientKill(t *testing.T, nodes []*node, c *client.Client, h *history, prefix string) error {
	for round := range rounds(1, 4) {
		resource := fmt.Sprintf("%s/r%d", prefix, round)
		cp, err := startWritingClient(t, resource, nodes, clientOpts{})
		if err != nil {
			return err
		}
		if err := cp.Kill(); err != nil {
			return err
		}
		o := cp.output()
		h.granted(resource, o.leaseID, o.token)
		for _, w := range o.acks {
			h.wrote(w)
		}
		ctx, cancel := context.WithTimeout(context.Background(), progressTimeout)
		l, err := c.Acquire(ctx, resource, client.TTL(workloadTTL), client.Wait(progressTimeout-5*time.Second))
		cancel()
		if err != nil {
			return fmt.Errorf("acquire %s after its holder was killed: %w", resource, err)
		}
		h.granted(resource, l.ID(), l.Token())
		l.Release(context.Background())
	}
	return nil
}
