package main_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	lh "github.com/leasehold/leasehold/cmd/leasehold"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/bench"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// TestJSONOutputOfEveryCommand runs every command that prints something
// with --json against one real node, decodes its output into the
// documented structure with unknown fields refused, and checks the shared
// conventions over every key of every output: snake_case, one name per
// concept (a lease id is lease_id, never id or leaseId), ids and tokens as
// numbers, times RFC 3339 UTC, durations Go duration strings.
func TestJSONOutputOfEveryCommand(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	dir := t.TempDir()

	// State for the commands to show: a lease with metadata and progress,
	// a waiter, keys, an idempotency key, an election, a forced release.
	a := n.acquire("j/held", "--ttl", "1m", "--metadata", "ticket=OPS-1", "--operation", "backup")
	lid, secret, tok := strconv.FormatUint(a.LeaseID, 10), a.Secret, strconv.FormatUint(a.Token, 10)
	rel := n.acquire("j/rel", "--ttl", "1m")
	victim := n.acquire("j/victim", "--ttl", "1m")
	n.lhOK("force-release", "j/victim", "--lease", strconv.FormatUint(victim.LeaseID, 10), "--reason", "json test", "--yes")
	waiter := startProc(t, dir, "waiter", childEnv(), "acquire", "--endpoints", n.url, "--wait", "1m", "j/held")
	begun := n.idemPost(t, "Begin", `{"key":"j/pay","fingerprint":"YQ==","attemptTtl":"30s"}`)
	n.idemPost(t, "Complete", `{"key":"j/pay","attempt":"`+begun["attempt"].(string)+`","secret":"`+begun["secret"].(string)+`","result":"b2s="}`)
	elect := startProc(t, dir, "elect", childEnv(), "elect", "--endpoints", n.url, "j/election", "--value", "10.0.0.1",
		"--ttl", "10s", "--cgroup", "off", "--", "sleep", "60")
	watch := startProc(t, dir, "watch", childEnv(), "watch", "--endpoints", n.url, "--json", "--from-index", "0", "j/")
	observe := startProc(t, dir, "observe", childEnv(), "elect", "--endpoints", n.url, "j/election", "--observe", "--json")
	// A queue with three deliveries in flight (one each to ack, nack into a
	// dead letter, extend) and one message ready; a group with a member.
	n.lhOK("queue", "create", "j/q", "--max-receives", "1")
	for _, k := range []string{"a", "b", "c", "d"} {
		n.lhOK("queue", "send", "j/q", "--key", k, "--body", "body of "+k)
	}
	var inFlight cliout.Received
	if err := decodeStrict(n.lhOK("queue", "receive", "j/q", "--max", "3", "--json").stdout, &inFlight); err != nil || len(inFlight.Deliveries) != 3 {
		t.Fatalf("receive 3 from j/q: %+v, %v", inFlight, err)
	}
	delivery := func(i int) []string {
		d := inFlight.Deliveries[i]
		return []string{"j/q", "--sequence", strconv.FormatUint(d.Sequence, 10), "--token", strconv.FormatUint(d.Token, 10)}
	}
	n.lhOK("groups", "create", "j-g", "--partitions", "2")
	member := startProc(t, dir, "member", childEnv(), "groups", "run", "j-g", "--endpoints", n.url, "--member", "m1",
		"--ttl", "10s", "--cgroup", "off", "--", "sleep", "60")
	// A barrier with a party waiting at it, and a latch.
	n.lhOK("barrier", "create", "j/bar", "--parties", "2", "--timeout", "10m")
	n.lhOK("barrier", "create", "j/latch", "--parties", "2", "--latch")
	party := startProc(t, dir, "party", childEnv(), "barrier", "arrive", "j/bar", "--endpoints", n.url, "--as", "p1", "--wait", "1m")
	checkFor(t, 20*time.Second, func() error {
		if party.Exited() {
			t.Fatalf("barrier arrive ended early:\n%s", party.Stderr())
		}
		if !strings.Contains(n.lhOK("barrier", "show", "j/bar").stdout, "p1") {
			return fmt.Errorf("j/bar has no party yet")
		}
		return nil
	})
	backup := filepath.Join(dir, "backup.lhsnap")
	checkFor(t, 20*time.Second, func() error {
		if member.Exited() {
			t.Fatalf("groups run ended early:\n%s", member.Stderr())
		}
		if !strings.Contains(n.lhOK("groups", "show", "j-g").stdout, "m1") {
			return fmt.Errorf("j-g has no member yet")
		}
		return nil
	})
	checkFor(t, 20*time.Second, func() error {
		if waiter.Exited() || elect.Exited() {
			t.Fatalf("a background command ended early:\n%s\n%s", waiter.Stderr(), elect.Stderr())
		}
		if l := n.status("j/held"); len(l.Waiters) != 1 {
			return fmt.Errorf("j/held has %d waiters, want 1", len(l.Waiters))
		}
		if !strings.Contains(n.lhOK("elections").stdout, "10.0.0.1") {
			return fmt.Errorf("j/election has no leader yet")
		}
		return nil
	})

	txn := `{"if":[{"key":"j/k","version":0}],"then":[{"put":"j/k","value":"v1"},{"put":"j/bin","value":"x"}]}`
	cases := []struct {
		name  string
		args  []string
		stdin string
		into  any
	}{
		{"acquire", []string{"acquire", "--ttl", "1m", "--metadata", "a=b", "j/other"}, "", &cliout.Acquired{}},
		{"renew", []string{"renew", "--lease", lid, "--secret", secret, "--progress", "rows 1-10"}, "", &cliout.Renewed{}},
		{"status", []string{"status", "j/held"}, "", &cliout.Resource{}},
		{"list", []string{"list"}, "", &cliout.Leases{}},
		{"locks", []string{"locks"}, "", &cliout.Locks{}},
		{"locks show", []string{"locks", "show", "j/held"}, "", &cliout.Lock{}},
		{"audit", []string{"audit", "--since", "1d"}, "", &cliout.Audit{}},
		{"cluster members", []string{"cluster", "members"}, "", &cliout.Members{}},
		{"cluster status", []string{"cluster", "status"}, "", &cliout.ClusterStatus{}},
		{"elections", []string{"elections"}, "", &cliout.Elections{}},
		{"idem show", []string{"idem", "show", "j/pay"}, "", &cliout.IdemRecord{}},
		{"idem list", []string{"idem", "list"}, "", &cliout.IdemRecords{}},
		{"kv txn", []string{"kv", "txn"}, txn, &cliout.TxnResult{}},
		{"kv put", []string{"kv", "put", "j/k2", "v2", "--fence", "j/held", "--token", tok}, "", &cliout.KeyWritten{}},
		{"kv get", []string{"kv", "get", "j/k"}, "", &cliout.KeyValue{}},
		{"kv list", []string{"kv", "list", "j/"}, "", &cliout.KeyValues{}},
		{"kv delete", []string{"kv", "delete", "j/k2"}, "", &cliout.KeyWritten{}},
		{"check-fence", []string{"check-fence", "j/held", tok}, "", &cliout.FenceCheck{}},
		{"version", []string{"version"}, "", &cliout.Version{}},
		{"health", []string{"health"}, "", &cliout.Health{}},
		{"bench", []string{"bench", "--duration", "500ms", "--warmup", "0s", "--clients", "2", "--resources", "8"}, "", &bench.Report{}},
		{"release", []string{"release", "--lease", strconv.FormatUint(rel.LeaseID, 10), "--secret", rel.Secret}, "", &cliout.Released{}},
		{"acquire --limit", []string{"acquire", "--ttl", "1m", "--limit", "3", "j/sem"}, "", &cliout.Acquired{}},
		{"queue create", []string{"queue", "create", "j/q", "--max-receives", "1"}, "", &cliout.Queue{}},
		{"queue list", []string{"queue", "list"}, "", &cliout.Queues{}},
		{"queue show", []string{"queue", "show", "j/q"}, "", &cliout.Queue{}},
		{"queue send", []string{"queue", "send", "j/q", "--key", "e", "--body", "e"}, "", &cliout.Sent{}},
		{"queue receive", []string{"queue", "receive", "j/q", "--max", "2"}, "", &cliout.Received{}},
		{"queue ack", append([]string{"queue", "ack"}, delivery(0)...), "", &cliout.Acked{}},
		{"queue nack", append([]string{"queue", "nack", "--error", "boom"}, delivery(1)...), "", &cliout.Nacked{}},
		{"queue extend", append([]string{"queue", "extend", "--visibility", "1m"}, delivery(2)...), "", &cliout.Extended{}},
		{"queue dead-letters", []string{"queue", "dead-letters", "j/q"}, "", &cliout.DeadLetters{}},
		{"queue redrive", []string{"queue", "redrive", "j/q"}, "", &cliout.Redriven{}},
		{"queue purge", []string{"queue", "purge", "j/q", "--reason", "json test", "--yes"}, "", &cliout.Purged{}},
		{"queue delete", []string{"queue", "delete", "j/q", "--reason", "json test", "--yes"}, "", &cliout.QueueDeleted{}},
		{"groups", []string{"groups"}, "", &cliout.Groups{}},
		{"groups show", []string{"groups", "show", "j-g"}, "", &cliout.GroupDetail{}},
		{"groups create", []string{"groups", "create", "j-g2", "--partitions", "2", "--revoke-timeout", "5s"}, "", &cliout.Group{}},
		{"groups grow", []string{"groups", "grow", "j-g2", "--partitions", "4"}, "", &cliout.Group{}},
		{"groups delete", []string{"groups", "delete", "j-g2", "--reason", "json test", "--yes"}, "", &cliout.GroupDeleted{}},
		{"barrier list", []string{"barrier", "list"}, "", &cliout.Barriers{}},
		{"barrier show", []string{"barrier", "show", "j/bar"}, "", &cliout.Barrier{}},
		{"barrier create", []string{"barrier", "create", "j/bar1", "--parties", "1", "--timeout", "1m"}, "", &cliout.Barrier{}},
		{"barrier arrive", []string{"barrier", "arrive", "j/bar1", "--as", "p9", "--wait", "10s"}, "", &cliout.PhaseEnded{}},
		{"barrier count-down", []string{"barrier", "count-down", "j/latch"}, "", &cliout.CountedDown{}},
		{"barrier wait", []string{"barrier", "wait", "j/latch", "--wait", "10s"}, "", &cliout.PhaseEnded{}},
		{"barrier reset", []string{"barrier", "reset", "j/bar"}, "", &cliout.PhaseEnded{}},
		{"barrier delete", []string{"barrier", "delete", "j/bar1", "--yes"}, "", &cliout.BarrierDeleted{}},
		{"snapshot save", []string{"snapshot", "save", backup}, "", &cliout.Backup{}},
		{"snapshot inspect", []string{"snapshot", "inspect", backup}, "", &cliout.BackupInspected{}},
		{"snapshot restore", []string{"snapshot", "restore", backup, "--data-dir", filepath.Join(dir, "restored")}, "", &cliout.Restored{}},
		{"recover", []string{"recover", "--data-dir", filepath.Join(dir, "restored")}, "", &cliout.Recovered{}},
		{"run", []string{"run", "j/run", "--ttl", "3s", "--cgroup", "off", "--", "true"}, "", &cliout.RunResult{}},
		{"elect", []string{"elect", "j/elect2", "--ttl", "3s", "--cgroup", "off", "--", "true"}, "", &cliout.RunResult{}},
		{"doctor", []string{"doctor", "--max-pause", "1s", "--window", "200ms"}, "", &cliout.Doctor{}},
		{"auth token", []string{"auth", "token", "j-ci", "--role", "worker", "--prefix", "j/"}, "", &cliout.AuthToken{}},
	}
	// Every command that takes -o has its JSON decoded here, or where named.
	elsewhere := map[string]string{"leasehold force-release": "below", "leasehold watch": "below",
		"leasehold cluster add": "TestClusterMembershipCommands", "leasehold cluster remove": "TestClusterMembershipCommands",
		"leasehold cluster transfer-leader": "TestClusterMembershipCommands", "leasehold torture": "TestTortureLocalShort"}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[lh.CommandOf(tc.args)] = true
	}
	for _, path := range lh.CommandsWithOutput() {
		if !covered[path] && elsewhere[path] == "" {
			t.Errorf("%s takes -o, but no test decodes its JSON: add it to the cases here", path)
		}
	}
	// Commands that change something once, and the first output of each.
	once := []string{"acquire", "kv delete", "release", "doctor", "run", "elect", "queue ack", "queue nack", "queue extend", "queue delete",
		"groups create", "groups grow", "groups delete", "snapshot restore",
		"barrier delete"}
	outs := map[string]string{}
	var docs []string
	for _, tc := range cases {
		for _, flag := range []string{"--json", "-o=json"} {
			args := slices.Insert(slices.Clone(tc.args), argsBeforeDash(tc.args), flag)
			if flag == "-o=json" && slices.Contains(once, tc.name) {
				continue // done once
			}
			r := lhStdin(t, tc.stdin, append([]string{args[0], "--endpoints", n.url}, args[1:]...)...)
			if r.code != 0 {
				t.Errorf("%s %s: %s", tc.name, flag, r)
				continue
			}
			v := reflect.New(reflect.TypeOf(tc.into).Elem()).Interface()
			if err := decodeStrict(r.stdout, v); err != nil {
				t.Errorf("%s %s: does not decode into %T: %v\n%s", tc.name, flag, tc.into, err, r.stdout)
			}
			docs = append(docs, r.stdout)
			if _, ok := outs[tc.name]; !ok {
				outs[tc.name] = r.stdout
			}
		}
	}
	// A message is named by one number, its sequence, from receive to ack
	// and to its dead letter.
	var acked cliout.Acked
	var dead cliout.DeadLetters
	if json.Unmarshal([]byte(outs["queue ack"]), &acked) != nil || acked.Sequence != inFlight.Deliveries[0].Sequence ||
		json.Unmarshal([]byte(outs["queue dead-letters"]), &dead) != nil || len(dead.DeadLetters) != 1 ||
		dead.DeadLetters[0].Sequence != inFlight.Deliveries[1].Sequence || dead.DeadLetters[0].Note != "boom" {
		t.Errorf("received %+v; ack printed %s; dead-letters printed %s: want the same sequence in each",
			inFlight.Deliveries, outs["queue ack"], outs["queue dead-letters"])
	}
	// renew (run twice above) renewed the lease and kept its progress note.
	if h := n.status("j/held").Holder; h == nil || h.RenewCount < 2 || h.Progress != "rows 1-10" {
		t.Errorf("after two renews with --progress, j/held's holder is %+v; want renew_count 2 and the note", h)
	}
	// force-release, the streams: one object per line.
	b := n.acquire("j/fr", "--ttl", "1m")
	r := n.lhOK("force-release", "j/fr", "--lease", strconv.FormatUint(b.LeaseID, 10), "--reason", "r", "--yes", "--json")
	if err := decodeStrict(r.stdout, &cliout.ForceReleased{}); err != nil {
		t.Errorf("force-release --json: %v\n%s", err, r.stdout)
	}
	docs = append(docs, r.stdout)
	for _, s := range []struct {
		p    *proc
		into func() any
		min  int
	}{{watch, func() any { return &cliout.Event{} }, 5}, {observe, func() any { return &cliout.Election{} }, 1}} {
		var lines []string
		checkFor(t, 10*time.Second, func() error {
			lines = strings.Split(strings.TrimSpace(s.p.Stdout()), "\n")
			if len(lines) < s.min {
				return fmt.Errorf("%d lines so far", len(lines))
			}
			return nil
		})
		for _, l := range lines {
			if err := decodeStrict(l, s.into()); err != nil {
				t.Errorf("%s line: %v\n%s", s.p.Name, err, l)
			}
			docs = append(docs, l)
		}
	}

	// The conventions, over every key seen.
	seen := map[string]bool{}
	for _, d := range docs {
		var v any
		if err := json.Unmarshal([]byte(d), &v); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, d)
		}
		checkConventions(t, "", v, seen)
	}
	for _, want := range []string{"lease_id", "token", "secret", "resource", "resources", "owner", "expires_in", "key", "version", "node_id",
		"election", "acquired_at", "slot", "limit", "queue", "sequence", "sent_at", "died_at", "group", "member", "partition", "epoch",
		"revoke_timeout", "taken_at", "last_token", "token_floor"} {
		if !seen[want] {
			t.Errorf("no output has the key %q: the table misses a command", want)
		}
	}
}

// argsBeforeDash is how many of args come before a "--" (all if none):
// where a flag of leasehold's must go.
func argsBeforeDash(args []string) int {
	if i := slices.Index(args, "--"); i >= 0 {
		return i
	}
	return len(args)
}

var (
	snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	// Keys that must not appear: another name for a concept that has one.
	otherNames = map[string]string{"id": "lease_id or node_id", "leaseId": "lease_id", "lease": "lease_id",
		"expiresIn": "expires_in", "leader_id": "leader_node_id", "delivery_id": "sequence", "delivery": "sequence",
		"seq": "sequence", "generation": "epoch", "partition_id": "partition"}
	durationKeys = map[string]bool{"ttl": true, "expires_in": true, "lock_delay": true, "max_hold": true, "held_for": true,
		"oldest_wait": true, "wait": true, "waiting": true, "safe_for": true, "last_contact": true, "retention": true,
		"visibility": true, "oldest_age": true, "dedup_window": true, "revoke_timeout": true, "delay": true}
	numberKeys = map[string]bool{"lease_id": true, "token": true, "index": true, "version": true, "term": true,
		"renew_count": true, "commit_index": true, "applied_index": true, "last_index": true, "candidates": true,
		"waiter_count": true, "result_size": true, "sequence": true, "epoch": true, "partition": true, "partitions": true,
		"receives": true, "depth": true, "last_token": true, "token_floor": true, "size": true, "rebalances": true}
)

// checkConventions walks a decoded JSON value and checks each key.
func checkConventions(t *testing.T, path string, v any, seen map[string]bool) {
	t.Helper()
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			checkConventions(t, path+"[]", e, seen)
		}
	case map[string]any:
		for k, e := range v {
			seen[k] = true
			at := path + "." + k
			if !snakeCase.MatchString(k) && k != "metadata" && !strings.HasPrefix(path, ".metadata") {
				if !strings.Contains(path, "metadata") {
					t.Errorf("%s: key %q is not snake_case", at, k)
				}
			}
			if want, bad := otherNames[k]; bad {
				t.Errorf("%s: key %q; the conventions name it %s", at, k, want)
			}
			switch {
			case durationKeys[k]:
				if s, ok := e.(string); !ok {
					t.Errorf("%s: %v; want a duration string", at, e)
				} else if _, err := time.ParseDuration(s); err != nil {
					t.Errorf("%s: %q is not a Go duration", at, s)
				}
			case numberKeys[k]:
				nums, isList := e.([]any) // a member's partitions: a list of numbers
				if !isList {
					nums = []any{e}
				}
				for _, e := range nums {
					if _, ok := e.(float64); !ok {
						t.Errorf("%s: %v (%T); want a JSON number", at, e, e)
					}
				}
			case strings.HasSuffix(k, "_at") || k == "time" || k == "since" || k == "safe_deadline":
				s, _ := e.(string)
				if ts, err := time.Parse(time.RFC3339, s); err != nil || !strings.HasSuffix(s, "Z") || ts.IsZero() {
					t.Errorf("%s: %v; want an RFC 3339 UTC time", at, e)
				}
			}
			if k != "metadata" {
				checkConventions(t, at, e, seen)
			}
		}
	}
}
