package main_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// TestCLIHabits: the habits people bring from etcdctl and consul, against
// one real node — endpoints as host:port, renew --keep-alive, --wait
// forever, completion of every kind of name, and messages that read once.
func TestCLIHabits(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	dir := t.TempDir()

	t.Run("endpoints as host:port", func(t *testing.T) {
		hostPort := strings.TrimPrefix(n.url, "http://")
		for _, args := range [][]string{{"status", "h/x", "--endpoints", hostPort}, {"health", "--endpoints", hostPort},
			{"list", "--endpoints", " " + hostPort + "/ ,"}} {
			if r := lhEnv(t, childEnv(), args...); r.code != 0 {
				t.Errorf("leasehold %s: %s", strings.Join(args, " "), r)
			}
		}
		if r := lhEnv(t, childEnv("LEASEHOLD_ENDPOINTS="+hostPort), "status", "h/x"); r.code != 0 {
			t.Errorf("status with LEASEHOLD_ENDPOINTS=%s: %s", hostPort, r)
		}
	})

	t.Run("renew --keep-alive", func(t *testing.T) {
		n := n.with(t)
		const ttl = 2 * time.Second
		a := n.acquire("h/kept", "--ttl", ttl.String())
		start := time.Now()
		keep := startProc(t, dir, "keep-alive", childEnv(), "renew", "--endpoints", n.url, "--lease", strconv.FormatUint(a.LeaseID, 10),
			"--secret", a.Secret, "--keep-alive", "--progress", "started", "-o", "json")
		var lines []string
		checkFor(t, 20*time.Second, func() error {
			if keep.Exited() {
				t.Fatalf("keep-alive ended: %v\n%s", keep.Err, keep.Stderr())
			}
			lines = strings.Split(strings.TrimSpace(keep.Stdout()), "\n")
			if time.Since(start) < 2*ttl || len(lines) < 5 {
				return fmt.Errorf("%d renewals after %v", len(lines), time.Since(start))
			}
			return nil
		})
		for i, l := range lines {
			var r cliout.Renewed
			if err := decodeStrict(l, &r); err != nil || r.LeaseID != a.LeaseID || r.ExpiresIn != "2s" || r.SafeDeadline == "" ||
				(i == 0) != (r.Progress == "started") {
				t.Errorf("renewal %d: %q (%v); want lease %d, expires_in 2s, a safe deadline, the progress note on the first only",
					i+1, l, err, a.LeaseID)
			}
		}
		if h := n.status("h/kept").Holder; h == nil || h.LeaseID != a.LeaseID || h.RenewCount < 4 {
			t.Fatalf("two TTLs into keep-alive, h/kept is held by %+v; want lease %d, renewed", h, a.LeaseID)
		}
		keep.Signal(syscall.SIGINT)
		if !keep.Wait(10*time.Second) || keep.Code() != 0 || !strings.Contains(keep.Stderr(), "interrupted") {
			t.Errorf("keep-alive after SIGINT: exit %d (want 0, saying it was interrupted)\n%s", keep.Code(), keep.Stderr())
		}

		// A lease lost under it (forced here) ends it: exit 5, said once.
		b := n.acquire("h/lost", "--ttl", ttl.String())
		lost := startProc(t, dir, "keep-alive-lost", childEnv(), "renew", "--endpoints", n.url, "--lease", strconv.FormatUint(b.LeaseID, 10),
			"--secret", b.Secret, "--keep-alive")
		checkFor(t, 10*time.Second, func() error {
			if !strings.Contains(lost.Stdout(), "renewed lease") {
				return fmt.Errorf("not renewed yet")
			}
			return nil
		})
		n.lhOK("force-release", "h/lost", "--lease", strconv.FormatUint(b.LeaseID, 10), "--reason", "keep-alive test", "--yes")
		if !lost.Wait(2*ttl) || lost.Code() != 5 || strings.Count(lost.Stderr(), "gone") != 1 {
			t.Errorf("keep-alive of a lease force-released: want exit 5 within a TTL and one message saying it is gone; exit %d\n%s",
				lost.Code(), lost.Stderr())
		}
	})

	t.Run("--wait forever", func(t *testing.T) {
		n := n.with(t)
		holders := map[string]acquired{"acquire": n.acquire("h/wa", "--ttl", "1m"), "run": n.acquire("h/wr", "--ttl", "1m")}
		waiters := map[string]*proc{
			"acquire": startProc(t, dir, "acquire-forever", childEnv(), "acquire", "--endpoints", n.url, "h/wa", "--wait", "forever", "-o", "json"),
			"run": startProc(t, dir, "run-forever", childEnv(), "run", "--endpoints", n.url, "h/wr", "--wait", "forever", "-o", "json",
				"--", "true"),
		}
		for what, res := range map[string]string{"acquire": "h/wa", "run": "h/wr"} {
			checkFor(t, 10*time.Second, func() error {
				if waiters[what].Exited() {
					t.Fatalf("%s --wait forever ended while %s was held: %s", what, res, waiters[what].Stderr())
				}
				if len(n.status(res).Waiters) != 1 {
					return fmt.Errorf("%s is not waiting yet", what)
				}
				return nil
			})
			n.lhOK("release", "--lease", strconv.FormatUint(holders[what].LeaseID, 10), "--secret", holders[what].Secret)
		}
		for what, p := range waiters {
			if !p.Wait(10*time.Second) || p.Code() != 0 {
				t.Errorf("%s --wait forever, once the holder released: exit %d\n%s", what, p.Code(), p.Stderr())
			}
		}
		var got acquired
		var res cliout.RunResult
		if err := decodeStrict(waiters["acquire"].Stdout(), &got); err != nil || got.LeaseID == 0 {
			t.Errorf("acquire --wait forever -o json: %+v, %v", got, err)
		}
		if err := decodeStrict(waiters["run"].Stdout(), &res); err != nil || res.LeaseID == 0 || res.ExitCode != 0 {
			t.Errorf("run --wait forever -o json: %+v, %v", res, err)
		}
	})

	t.Run("completion", func(t *testing.T) {
		n := n.with(t)
		n.lhOK("queue", "create", "hq/orders")
		n.lhOK("groups", "create", "hg-shards", "--partitions", "1")
		n.lhOK("kv", "put", "hk/a", "v")
		n.acquire("hr/held", "--ttl", "1m")
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"queue", "send", "hq/"}, "hq/orders"},
			{[]string{"queue", "purge", "hq/o"}, "hq/orders"},
			{[]string{"groups", "show", "hg-"}, "hg-shards"},
			{[]string{"groups", "run", "hg"}, "hg-shards"},
			{[]string{"check-fence", "--queue", "hq/"}, "hq/orders"},
			{[]string{"check-fence", "--group", "h"}, "hg-shards"},
			{[]string{"kv", "put", "hk/b", "v", "--fence-queue", "hq"}, "hq/orders"},
			{[]string{"kv", "put", "hk/b", "v", "--fence", "hr/"}, "hr/held"},
			{[]string{"kv", "put", "hk/"}, "hk/a"},
			{[]string{"status", "hr/"}, "hr/held"},
		} {
			r := lhEnv(t, childEnv("LEASEHOLD_ENDPOINTS="+n.url), append([]string{"__complete"}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if r.code != 0 || !slices.Contains(lines, tc.want) || lines[len(lines)-1] != ":4" {
				t.Errorf("completion of %q: want %s and no file completion (:4)\n%s", strings.Join(tc.args, " "), tc.want, r)
			}
		}
	})

	t.Run("messages read once", func(t *testing.T) {
		n := n.with(t)
		a := n.acquire("h/twice", "--ttl", "1m")
		id := strconv.FormatUint(a.LeaseID, 10)
		n.lhOK("release", "--lease", id, "--secret", a.Secret)
		r := n.lh("release", "--lease", id, "--secret", a.Secret)
		if r.code != 5 || strings.Count(r.stderr, "expired or was released") != 1 || strings.Count(r.stderr, "gone") != 1 {
			t.Errorf("a second release: want exit 5 and the reason said once\n%s", r)
		}
		n.lhOK("queue", "create", "hq/one", "--max-receives", "1")
		n.lhOK("queue", "send", "hq/one", "--key", "k", "--body", "b")
		var got cliout.Received
		if err := json.Unmarshal([]byte(n.lhOK("queue", "receive", "hq/one", "-o", "json").stdout), &got); err != nil || len(got.Deliveries) != 1 {
			t.Fatalf("receive: %+v, %v", got, err)
		}
		d := got.Deliveries[0]
		n.lhOK("queue", "nack", "hq/one", "--sequence", strconv.FormatUint(d.Sequence, 10), "--token", strconv.FormatUint(d.Token, 10))
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"queue", "redrive", "hq/one"}, "moved 1 dead letter back"},
			{[]string{"queue", "purge", "hq/one", "--reason", "test", "--yes"}, "dropped 1 message of hq/one"},
			{[]string{"groups", "create", "hg-one", "--partitions", "1"}, "with 1 partition\n"},
		} {
			if r := n.lhOK(tc.args...); !strings.Contains(r.stdout, tc.want) {
				t.Errorf("leasehold %s: want %q\n%s", strings.Join(tc.args, " "), tc.want, r)
			}
		}
	})

	t.Run("audit's help names every action it records", func(t *testing.T) {
		n := n.with(t)
		a := n.acquire("h/forced", "--ttl", "1m")
		n.lhOK("force-release", "h/forced", "--lease", strconv.FormatUint(a.LeaseID, 10), "--reason", "audit test", "--yes")
		n.lhOK("queue", "create", "hq/audited")
		n.lhOK("queue", "purge", "hq/audited", "--reason", "audit test", "--yes")
		n.lhOK("queue", "delete", "hq/audited", "--reason", "audit test", "--yes")
		n.lhOK("groups", "create", "hg-audited", "--partitions", "1")
		n.lhOK("groups", "delete", "hg-audited", "--reason", "audit test", "--yes")
		var audit cliout.Audit
		if err := decodeStrict(n.lhOK("audit", "-o", "json").stdout, &audit); err != nil {
			t.Fatal(err)
		}
		help := n.lhOK("audit", "--help").stdout
		// The command that records each action, as people type it.
		commandOf := map[string]string{"force-release": "force-release", "queue-purge": "queue purge",
			"queue-delete": "queue delete", "group-delete": "groups delete"}
		seen := map[string]bool{}
		for _, rec := range audit.Records {
			seen[rec.Action] = true
			c, ok := commandOf[rec.Action]
			if !ok {
				t.Errorf("audit records %q, which its help does not know: name it there and here", rec.Action)
			} else if !strings.Contains(help, c) {
				t.Errorf("audit records %q (by %s), but its help does not say so:\n%s", rec.Action, c, help)
			}
		}
		if len(seen) != len(commandOf) {
			t.Errorf("audit recorded %v; want each of %v", seen, commandOf)
		}
	})

	t.Run("run names its watchdog only with -v or on a stop", func(t *testing.T) {
		n := n.with(t)
		if r := n.lhOK("run", "h/quiet", "--", "true"); r.stderr != "" {
			t.Errorf("run of a command that succeeds printed to stderr: %q", r.stderr)
		}
		if r := n.lhOK("run", "h/quiet", "-v", "--", "true"); !strings.Contains(r.stderr, "watchdog pid ") {
			t.Errorf("run -v does not say which watchdog guards the command: %q", r.stderr)
		}
	})
}
