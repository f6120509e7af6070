package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
	"github.com/leasehold/leasehold/server"
)

// TestExitCodes: each failure exits with its own status (leasehold help
// exit-codes), against one real node.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	held := n.acquire("ex/held", "--ttl", "1m")
	gone := n.acquire("ex/gone", "--ttl", "1m")
	n.lhOK("release", "--lease", strconv.FormatUint(gone.LeaseID, 10), "--secret", gone.Secret)
	id := strconv.FormatUint(held.LeaseID, 10)
	// A queue with a message in flight, a full queue, a group, a backup
	// and a damaged copy of it.
	n.lhOK("queue", "create", "ex/q")
	n.lhOK("queue", "send", "ex/q", "--key", "k", "--body", "b")
	var got cliout.Received
	if err := decodeStrict(n.lhOK("queue", "receive", "ex/q", "--json").stdout, &got); err != nil || len(got.Deliveries) != 1 {
		t.Fatalf("receive from ex/q: %+v, %v", got, err)
	}
	d := got.Deliveries[0]
	seq, staleTok := strconv.FormatUint(d.Sequence, 10), strconv.FormatUint(d.Token+1, 10)
	n.lhOK("queue", "create", "ex/full", "--max-depth", "1")
	n.lhOK("queue", "send", "ex/full", "--key", "k", "--body", "b")
	n.lhOK("groups", "create", "ex-g", "--partitions", "2")
	dir := t.TempDir()
	backup, damaged := filepath.Join(dir, "ok.lhsnap"), filepath.Join(dir, "damaged.lhsnap")
	n.lhOK("snapshot", "save", backup)
	raw, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 0xff
	if err := os.WriteFile(damaged, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"unknown command", []string{"frobnicate"}, 2},
		{"run without --", []string{"run", "ex/r", "true"}, 2},
		{"elect without --", []string{"elect", "ex/e", "true"}, 2},
		{"a bad duration", []string{"acquire", "--ttl", "soon", "ex/x"}, 2},
		{"no such help topic", []string{"help", "frobnicate"}, 2},
		{"no such shell", []string{"completion", "frobnicate"}, 2},
		{"unknown subcommand of a group", []string{"cluster", "frobnicate"}, 2},
		{"unknown flag", []string{"status", "--frobnicate", "x"}, 2},
		{"missing argument", []string{"status"}, 2},
		{"bad -o", []string{"list", "-o", "yaml"}, 2},
		{"invalid request", []string{"acquire", "--ttl", "1ms", "ex/x"}, 2},
		{"held", []string{"acquire", "ex/held"}, 3},
		{"wait timed out", []string{"acquire", "--wait", "300ms", "ex/held"}, 4},
		{"wrong secret", []string{"release", "--lease", id, "--secret", strings.Repeat("0", 32)}, 5},
		{"lease gone", []string{"release", "--lease", strconv.FormatUint(gone.LeaseID, 10), "--secret", gone.Secret}, 5},
		{"not found", []string{"idem", "show", "no/such/key"}, 6},
		{"force-release without a terminal", []string{"force-release", "ex/held", "--lease", id, "--reason", "test"}, 2},
		{"queue: bad flag value", []string{"queue", "receive", "ex/q", "--max", "0"}, 2},
		{"queue: ack without a token", []string{"queue", "ack", "ex/q", "--sequence", seq}, 2},
		{"queue: unknown subcommand", []string{"queue", "frobnicate"}, 2},
		{"queue: not found", []string{"queue", "show", "ex/no-such-queue"}, 6},
		{"queue: send to a missing queue", []string{"queue", "send", "ex/no-such-queue", "--key", "k", "--body", "b"}, 6},
		{"queue: stale delivery token", []string{"queue", "ack", "ex/q", "--sequence", seq, "--token", staleTok}, 5},
		{"queue: extend with a stale token", []string{"queue", "extend", "ex/q", "--sequence", seq, "--token", staleTok, "--visibility", "30s"}, 5},
		{"queue: backpressure", []string{"queue", "send", "ex/full", "--key", "k", "--body", "b2"}, 9},
		{"groups: create without --partitions", []string{"groups", "create", "ex-g2"}, 2},
		{"groups: delete without --reason", []string{"groups", "delete", "ex-g", "--yes"}, 2},
		{"groups: not found", []string{"groups", "show", "ex-no-such-group"}, 6},
		{"groups: grow a missing group", []string{"groups", "grow", "ex-no-such-group", "--partitions", "4"}, 6},
		{"groups: already exists", []string{"groups", "create", "ex-g", "--partitions", "3"}, 3},
		{"groups run: no --member", []string{"groups", "run", "ex-g", "--", "true"}, 2},
		{"groups run: no command after --", []string{"groups", "run", "ex-g", "--member", "m", "true"}, 2},
		{"groups run: bad --cgroup", []string{"groups", "run", "ex-g", "--member", "m", "--cgroup", "on", "--", "true"}, 2},
		{"groups run: grace too long", []string{"groups", "run", "ex-g", "--member", "m", "--ttl", "4s", "--grace", "3s", "--", "true"}, 2},
		{"groups run: no such group", []string{"groups", "run", "ex-no-such-group", "--member", "m", "--ttl", "3s", "--", "true"}, 125},
		{"groups run: command not found", []string{"groups", "run", "ex-g", "--member", "m", "--", "no-such-command-leasehold"}, 127},
		{"snapshot: damaged backup", []string{"snapshot", "inspect", damaged}, 1},
		{"snapshot: restore a damaged backup", []string{"snapshot", "restore", damaged, "--data-dir", filepath.Join(dir, "never")}, 1},
		{"snapshot: restore without --data-dir", []string{"snapshot", "restore", backup}, 2},
		{"snapshot: no such file", []string{"snapshot", "inspect", filepath.Join(dir, "no-such.lhsnap")}, 2},
		{"snapshot: unknown subcommand", []string{"snapshot", "frobnicate"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := n.with(t).lh(tc.args...)
			if r.code != tc.want {
				t.Errorf("leasehold %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), r.code, tc.want, r)
			}
			if r.code != 0 && !strings.HasPrefix(r.stderr, "leasehold: ") {
				t.Errorf("stderr does not start with a message: %q", r.stderr)
			}
			if r.code == 2 && !regexp.MustCompile(`\nRun 'leasehold [a-z -]*--help' for usage.\n$`).MatchString(r.stderr) {
				t.Errorf("a usage error does not end naming the help to read: %q", r.stderr)
			}
		})
	}
	// force-release with stdin /dev/null (not a terminal) says why and
	// released nothing.
	// Before it asks, it points to the runbook's section on the risk.
	r := n.lh("force-release", "ex/held", "--lease", id, "--reason", "test")
	if !strings.Contains(r.stderr, "needs a terminal; pass --yes") {
		t.Errorf("force-release with stdin /dev/null: want a refusal naming --yes:\n%s", r)
	}
	if !strings.Contains(r.stdout, "docs/runbook.md#force-release") {
		t.Errorf("force-release does not point to docs/runbook.md#force-release before asking:\n%s", r)
	}
	if g := n.status("ex/held"); g.Holder == nil || g.Holder.LeaseID != held.LeaseID {
		t.Errorf("after force-release without a terminal or --yes, ex/held is held by %+v, want lease %d", g.Holder, held.LeaseID)
	}

	// help exit-codes prints the table.
	if r := lhEnv(t, childEnv(), "help", "exit-codes"); r.code != 0 || !strings.Contains(r.stdout, "124  run, elect: the command was stopped") ||
		!strings.Contains(r.stdout, "  7    unavailable") {
		t.Errorf("help exit-codes:\n%s", r)
	}
	// Shell completion of resource names comes from the List API.
	t.Run("completion", func(t *testing.T) {
		r := lhEnv(t, childEnv("LEASEHOLD_ENDPOINTS="+n.url), "__complete", "status", "ex/")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || !slices.Contains(lines, "ex/held") || slices.Contains(lines, "ex/gone") || !strings.HasPrefix(lines[len(lines)-1], ":4") {
			t.Errorf("completion of status ex/: want ex/held (held), not ex/gone (released), and no file completion (:4)\n%s", r)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		for _, args := range [][]string{{"status", "x"}, {"snapshot", "save", filepath.Join(dir, "never.lhsnap")},
			{"queue", "list"}, {"groups", "show", "g"}} {
			r := lhEnv(t, childEnv(), append(args, "--endpoints", "http://"+freeAddr(t), "--timeout", "1s")...)
			if r.code != 7 {
				t.Errorf("%s of an unreachable node: exit %d, want 7\n%s", strings.Join(args, " "), r.code, r)
			}
		}
	})
}

// TestRunExitCodes: run passes the child's status through and has its own
// for a command not found (127), not executable (126), a lease it could
// not get (125) and a lease lost mid-run (124).
func TestRunExitCodes(t *testing.T) {
	n := startNode(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.acquire("run/held", "--ttl", "1m")

	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"child exits 3", []string{"run", "run/a", "--ttl", "3s", "--", "sh", "-c", "exit 3"}, 3},
		{"command not found", []string{"run", "run/a", "--ttl", "3s", "--", "no-such-command-leasehold"}, 127},
		{"not executable", []string{"run", "run/a", "--ttl", "3s", "--", notExec}, 126},
		{"lease held", []string{"run", "run/held", "--ttl", "3s", "--wait", "0s", "--", "true"}, 125},
		{"elect: command not found", []string{"elect", "run/e", "--ttl", "3s", "--", "no-such-command-leasehold"}, 127},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := n.with(t).lh(tc.args...)
			if r.code != tc.want {
				t.Errorf("leasehold %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), r.code, tc.want, r)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		r := n.with(t).lh("run", "run/j", "--ttl", "3s", "--lock-delay", "1s", "--max-hold", "1m", "--json", "--",
			"sh", "-c", "echo child output; exit 3")
		child, doc, _ := strings.Cut(r.stdout, "\n")
		var res cliout.RunResult
		if err := decodeStrict(doc, &res); err != nil || child != "child output" {
			t.Fatalf("run --json: want the child's output, then a RunResult (%v)\n%s", err, r)
		}
		if r.code != 3 || res.ExitCode != 3 || res.LeaseID == 0 || res.Token == 0 || res.LeaseLost || res.Resource != "run/j" {
			t.Errorf("run --json of a child exiting 3: exit %d, %+v", r.code, res)
		}
	})
	// A command that cannot start never took the lease.
	if g := n.status("run/a"); g.Holder != nil {
		t.Errorf("run/a is held by %+v after the runs ended", g.Holder)
	}

	t.Run("lease lost mid-run", func(t *testing.T) {
		n := n.with(t)
		ready := filepath.Join(dir, "ready")
		p := startProc(t, dir, "run", childEnv("READY="+ready), "run", "--endpoints", n.url, "run/lost",
			"--ttl", "3s", "--grace", "300ms", "--cgroup", "off", "--json", "--",
			"sh", "-c", `touch "$READY"; while :; do sleep 0.05; done`)
		checkFor(t, 15*time.Second, func() error {
			if p.Exited() {
				t.Fatalf("run exited early: %v\n%s", p.Err, p.Stderr())
			}
			_, err := os.Stat(ready)
			return err
		})
		h := n.status("run/lost").Holder
		if h == nil {
			t.Fatal("run/lost is not held while run's child runs")
		}
		n.lhOK("force-release", "run/lost", "--lease", strconv.FormatUint(h.LeaseID, 10), "--reason", "exit code test", "--yes")
		if !p.Wait(15 * time.Second) {
			t.Fatalf("run did not end within 15s of its lease being force-released\n%s", p.Stderr())
		}
		if p.Code() != 124 {
			t.Errorf("run exited %d after its lease was lost, want 124\n%s", p.Code(), p.Stderr())
		}
		var res cliout.RunResult
		if err := decodeStrict(p.Stdout(), &res); err != nil || !res.LeaseLost || res.ExitCode != 124 || res.LeaseID != h.LeaseID {
			t.Errorf("run --json after its lease was lost: %+v (%v); want lease_lost, exit_code 124, lease_id %d", res, err, h.LeaseID)
		}
	})
}

// TestExitCodesPermissionAndLimits: 8 for a caller without the right token,
// 9 for a request over a limit, against a node with auth and a waiter limit.
func TestExitCodesPermissionAndLimits(t *testing.T) {
	t.Parallel()
	const workerTok, adminTok = "wrk-0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f", "adm-0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f"
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.json")
	auth := fmt.Sprintf(`{"tokens":[{"name":"w","sha256":%q,"role":"worker","prefixes":["jobs/"]},{"name":"a","sha256":%q,"role":"admin"}]}`,
		server.HashToken(workerTok), server.HashToken(adminTok))
	tokFile, adminFile := filepath.Join(dir, "token"), filepath.Join(dir, "admin-token")
	if os.WriteFile(authFile, []byte(auth), 0o600) != nil || os.WriteFile(tokFile, []byte(workerTok+"\n"), 0o600) != nil ||
		os.WriteFile(adminFile, []byte(adminTok+"\n"), 0o600) != nil {
		t.Fatal("cannot write the auth files")
	}
	n := newNode(t)
	n.args = []string{"--auth-file", authFile, "--max-waiters-per-resource", "1"}
	n.start()
	lh := func(withToken bool, args ...string) cliResult {
		env := childEnv()
		if withToken {
			env = append(env, "LEASEHOLD_TOKEN_FILE="+tokFile)
		}
		return lhEnv(t, env, append([]string{args[0], "--endpoints", n.url}, args[1:]...)...)
	}
	if r := lh(true, "acquire", "--ttl", "1m", "jobs/a"); r.code != 0 {
		t.Fatalf("acquire jobs/a with the worker's token: %s", r)
	}
	waiter := startProc(t, dir, "waiter", append(childEnv(), "LEASEHOLD_TOKEN_FILE="+tokFile),
		"acquire", "--endpoints", n.url, "--wait", "1m", "jobs/a")
	checkFor(t, 10*time.Second, func() error {
		if waiter.Exited() {
			t.Fatalf("the waiter ended: %s", waiter.Stderr())
		}
		r := lhEnv(t, append(childEnv(), "LEASEHOLD_TOKEN_FILE="+adminFile), "status", "--endpoints", n.url, "--json", "jobs/a")
		if !strings.Contains(r.stdout, `"queued_at"`) {
			return fmt.Errorf("no waiter yet: %s", r)
		}
		return nil
	})
	for _, tc := range []struct {
		name      string
		withToken bool
		args      []string
		want      int
	}{
		{"no token", false, []string{"status", "jobs/a"}, 8},
		{"outside the token's prefixes", true, []string{"acquire", "other/a"}, 8},
		{"over the waiter limit", true, []string{"acquire", "--wait", "1m", "jobs/a"}, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := lh(tc.withToken, tc.args...); r.code != tc.want {
				t.Errorf("leasehold %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), r.code, tc.want, r)
			}
		})
	}
}
