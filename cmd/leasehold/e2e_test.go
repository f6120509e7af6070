package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

var secretRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// acquired is `leasehold acquire --json` output.
type acquired = cliout.Acquired

// decodeStrict decodes JSON output into v, refusing fields v lacks.
func decodeStrict(out string, v any) error {
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// acquire runs `acquire --json args...` and checks the output's shape.
func (n *node) acquire(args ...string) acquired {
	n.t.Helper()
	r := n.lhOK(append([]string{"acquire", "--json"}, args...)...)
	var a acquired
	if err := decodeStrict(r.stdout, &a); err != nil {
		n.t.Fatalf("acquire --json output %q: %v", r.stdout, err)
	}
	if a.LeaseID == 0 || a.Token == 0 || !secretRE.MatchString(a.Secret) {
		n.t.Fatalf("acquire --json: want a lease id, a token and a 32-hex-digit secret, got %+v", a)
	}
	return a
}

// status runs `status --json resource`.
func (n *node) status(resource string) *cliout.Resource {
	n.t.Helper()
	r := n.lhOK("status", "--json", resource)
	var g cliout.Resource
	if err := decodeStrict(r.stdout, &g); err != nil {
		n.t.Fatalf("status --json output %q: %v", r.stdout, err)
	}
	return &g
}

// list runs `list --json`.
func (n *node) list() []cliout.Lease {
	n.t.Helper()
	r := n.lhOK("list", "--json")
	var l cliout.Leases
	if err := decodeStrict(r.stdout, &l); err != nil {
		n.t.Fatalf("list --json output %q: %v", r.stdout, err)
	}
	return l.Leases
}

func (n *node) release(a acquired) cliResult {
	n.t.Helper()
	return n.lh("release", "--lease", strconv.FormatUint(a.LeaseID, 10), "--secret", a.Secret)
}

func byID(ls []cliout.Lease) map[uint64]cliout.Lease {
	m := make(map[uint64]cliout.Lease, len(ls))
	for _, l := range ls {
		m[l.LeaseID] = l
	}
	return m
}

// TestServeKillRestart: leases, their tokens and their secrets survive a
// SIGKILL of the server, and tokens keep growing across the restart.
func TestServeKillRestart(t *testing.T) {
	t.Parallel()
	n := startNode(t)

	held := map[uint64]acquired{}
	var maxToken uint64
	for _, rs := range [][]string{{"jobs/a"}, {"jobs/b"}, {"jobs/c", "jobs/d"}} {
		a := n.acquire(append([]string{"--ttl", "1m"}, rs...)...)
		if !slices.Equal(a.Resources, rs) {
			t.Fatalf("acquire %v: resources %v", rs, a.Resources)
		}
		if a.Token <= maxToken {
			t.Fatalf("token %d after %d: tokens must grow", a.Token, maxToken)
		}
		held[a.LeaseID], maxToken = a, a.Token
	}
	// A lease that was granted and released: its token was issued too.
	gone := n.acquire("--ttl", "1m", "jobs/e")
	if gone.Token <= maxToken {
		t.Fatalf("token %d after %d: tokens must grow", gone.Token, maxToken)
	}
	maxToken = gone.Token
	if r := n.release(gone); r.code != 0 {
		t.Fatalf("release: %s", r)
	}

	listStart := time.Now()
	before := byID(n.list())
	if len(before) != len(held) {
		t.Fatalf("before the kill, list shows %d leases, want %d", len(before), len(held))
	}

	n.kill()
	t.Logf("serve SIGKILLed: %v", n.p.Err)
	n.start()

	after := n.list()
	elapsed := time.Since(listStart)
	if len(after) != len(held) {
		t.Fatalf("after the restart, list shows %d leases, want %d: %v", len(after), len(held), after)
	}
	for _, l := range after {
		a, ok := held[l.LeaseID]
		if !ok {
			t.Fatalf("after the restart, list shows lease %d, which was not held: %v", l.LeaseID, l)
		}
		if l.Token != a.Token || !slices.Equal(l.Resources, a.Resources) {
			t.Errorf("lease %d after the restart: token %d resources %v, want token %d resources %v",
				l.LeaseID, l.Token, l.Resources, a.Token, a.Resources)
		}
		// Invariant 5: the takeover restarts the countdown; it never
		// shortens a lease.
		b := before[l.LeaseID]
		got, err1 := time.ParseDuration(l.ExpiresIn)
		had, err2 := time.ParseDuration(b.ExpiresIn)
		if err1 != nil || err2 != nil {
			t.Fatalf("lease %d: expires_in %q before, %q after the restart: want durations", l.LeaseID, b.ExpiresIn, l.ExpiresIn)
		}
		if got < had-elapsed {
			t.Errorf("lease %d expires in %v after the restart; before it had %v (%v ago): the restart shortened it",
				l.LeaseID, got, had, elapsed)
		}
		for _, res := range a.Resources {
			g := n.status(res)
			if g.Holder == nil || g.Holder.LeaseID != a.LeaseID || g.Holder.Token != a.Token {
				t.Errorf("status %s after the restart: holder %v, want lease %d with token %d", res, g.Holder, a.LeaseID, a.Token)
			}
		}
	}
	if g := n.status("jobs/e"); g.Holder != nil {
		t.Errorf("jobs/e was released before the kill, but after the restart it is held by %v", g.Holder)
	}

	// The held leases still exclude others, and their secrets still work.
	if r := n.lh("acquire", "jobs/a"); r.code == 0 {
		t.Errorf("acquire of jobs/a succeeded after the restart though it is held: %s", r)
	}
	for _, a := range held {
		if slices.Contains(a.Resources, "jobs/b") {
			if r := n.release(a); r.code != 0 {
				t.Errorf("release of lease %d with its secret after the restart: %s", a.LeaseID, r)
			}
		}
	}

	// Invariant 1: a token issued after the restart is larger than every
	// token issued before it.
	for _, res := range []string{"jobs/b", "jobs/new"} {
		a := n.acquire("--ttl", "1m", res)
		if a.Token <= maxToken {
			t.Errorf("acquire %s after the restart: token %d, but %d was issued before the kill", res, a.Token, maxToken)
		}
		maxToken = a.Token
	}
}

// TestServeGracefulSIGTERM: SIGTERM stops serve cleanly and quickly, and
// nothing is lost.
func TestServeGracefulSIGTERM(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	a := n.acquire("--ttl", "1m", "svc/x")

	start := time.Now()
	n.signal(syscall.SIGTERM)
	if !n.p.Wait(15 * time.Second) {
		t.Fatalf("serve still running 15s after SIGTERM\n%s", n.p.Stderr())
	}
	took := n.p.ExitedAt.Sub(start)
	t.Logf("serve exited %v after SIGTERM", took.Round(time.Millisecond))
	if n.p.Code() != 0 {
		t.Errorf("serve exited with %v after SIGTERM, want status 0\n%s", n.p.Err, n.p.Stderr())
	}
	if took > 5*time.Second {
		t.Errorf("serve took %v to exit after SIGTERM, want a few seconds at most", took)
	}
	log := n.p.Stderr()
	for _, want := range []string{"shutting down", "stopped"} {
		if !strings.Contains(log, want) {
			t.Errorf("serve's log lacks %q:\n%s", want, log)
		}
	}

	n.start()
	g := n.status("svc/x")
	if g.Holder == nil || g.Holder.LeaseID != a.LeaseID || g.Holder.Token != a.Token {
		t.Fatalf("after a graceful restart, svc/x is held by %v, want lease %d token %d", g.Holder, a.LeaseID, a.Token)
	}
	if b := n.acquire("svc/y"); b.Token <= a.Token {
		t.Errorf("token %d after the restart is not larger than %d from before", b.Token, a.Token)
	}
}

// parseText parses the "key: value" lines of `acquire`'s text output.
func parseText(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

func TestCLIAcquireReleaseStatusList(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	var secrets []string

	// Text output.
	r := n.lhOK("acquire", "--ttl", "1m", "--owner", "alice", "--operation", "backup", "db/main")
	txt := parseText(r.stdout)
	id, err1 := strconv.ParseUint(txt["lease_id"], 10, 64)
	tok, err2 := strconv.ParseUint(txt["token"], 10, 64)
	if err1 != nil || err2 != nil || id == 0 || tok == 0 || !secretRE.MatchString(txt["secret"]) ||
		txt["resources"] != "db/main" || !strings.HasPrefix(txt["expires"], "in ") {
		t.Fatalf("acquire text output has not the expected shape:\n%s", r.stdout)
	}
	text := acquired{LeaseID: id, Token: tok, Secret: txt["secret"], Resources: []string{"db/main"}}
	secrets = append(secrets, text.Secret)

	// JSON output: exactly the documented fields.
	r = n.lhOK("acquire", "--json", "--ttl", "1m", "--owner", "bob", "q/1", "q/2")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatalf("acquire --json: %v: %q", err, r.stdout)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range raw {
			if !yield(k) {
				return
			}
		}
	})
	if want := []string{"expires_in", "lease_id", "resources", "safe_deadline", "safe_for", "secret", "token", "ttl"}; !slices.Equal(keys, want) {
		t.Errorf("acquire --json keys %v, want %v", keys, want)
	}
	var multi acquired
	json.Unmarshal([]byte(r.stdout), &multi)
	if !secretRE.MatchString(multi.Secret) || multi.Token <= text.Token || !slices.Equal(multi.Resources, []string{"q/1", "q/2"}) {
		t.Errorf("acquire --json: %+v", multi)
	}
	if d, err := time.ParseDuration(multi.ExpiresIn); err != nil || d != time.Minute {
		t.Errorf("acquire --json expires_in %q: want the server's countdown, 1m", multi.ExpiresIn)
	}
	safe, err := time.ParseDuration(multi.SafeFor)
	if err != nil || safe <= 0 || safe >= time.Minute {
		t.Errorf("acquire --json safe_for %q: want a duration in (0, 1m): the client's deadline comes before the server's", multi.SafeFor)
	}
	if _, err := time.Parse(time.RFC3339, multi.SafeDeadline); err != nil || !strings.HasSuffix(multi.SafeDeadline, "Z") {
		t.Errorf("acquire --json safe_deadline %q: want an RFC 3339 UTC time (%v)", multi.SafeDeadline, err)
	}
	secrets = append(secrets, multi.Secret)

	// Status shows the holder, in text and JSON.
	r = n.lhOK("status", "db/main")
	for _, want := range []string{
		fmt.Sprintf("db/main: held by lease %d", text.LeaseID), "owner:      alice",
		"operation:  backup", fmt.Sprintf("token:      %d", text.Token),
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status db/main lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, res := range []string{"q/1", "q/2"} {
		if g := n.status(res); g.Holder == nil || g.Holder.LeaseID != multi.LeaseID || g.Holder.Owner != "bob" {
			t.Errorf("status --json %s: holder %v, want lease %d owned by bob", res, g.Holder, multi.LeaseID)
		}
	}
	if r := n.lhOK("status", "nothing/here"); strings.TrimSpace(r.stdout) != "nothing/here: free" {
		t.Errorf("status of a free resource: %q", r.stdout)
	}

	// List, text and JSON, with and without a prefix.
	r = n.lhOK("list")
	if !strings.HasPrefix(r.stdout, "LEASE") || !strings.Contains(r.stdout, "q/1,q/2") || !strings.Contains(r.stdout, "alice") {
		t.Errorf("list:\n%s", r.stdout)
	}
	if ls := n.list(); len(ls) != 2 {
		t.Errorf("list --json shows %d leases, want 2: %v", len(ls), ls)
	}
	r = n.lhOK("list", "--json", "--prefix", "q/")
	var pl cliout.Leases
	if err := decodeStrict(r.stdout, &pl); err != nil || len(pl.Leases) != 1 || pl.Leases[0].LeaseID != multi.LeaseID {
		t.Errorf("list --json --prefix q/: %v %s", err, r.stdout)
	}

	// A held resource cannot be taken; the message names the holder.
	r = n.lh("acquire", "--owner", "carol", "db/main")
	if r.code == 0 {
		t.Fatalf("acquire of a held resource succeeded: %s", r)
	}
	for _, want := range []string{"held", fmt.Sprintf("lease %d", text.LeaseID), `"alice"`, `"backup"`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("acquire of a held resource: message lacks %q: %s", want, r.stderr)
		}
	}
	// All or nothing: q/2 is held, so neither is taken.
	if r := n.lh("acquire", "free/1", "q/2"); r.code == 0 {
		t.Errorf("acquire of free/1 and held q/2 succeeded: %s", r)
	}
	if g := n.status("free/1"); g.Holder != nil {
		t.Errorf("a failed multi-resource acquire left free/1 held by %v", g.Holder)
	}

	// A wrong secret releases nothing.
	r = n.lh("release", "--lease", strconv.FormatUint(text.LeaseID, 10), "--secret", strings.Repeat("0", 32))
	if r.code == 0 || !strings.Contains(r.stderr, "secret") {
		t.Errorf("release with a wrong secret: %s", r)
	}
	if g := n.status("db/main"); g.Holder == nil || g.Holder.LeaseID != text.LeaseID {
		t.Errorf("after a release with a wrong secret, db/main is held by %v", g.Holder)
	}
	// Missing flags.
	if r := n.lh("release", "--lease", "1"); r.code == 0 || !strings.Contains(r.stderr, "--secret") {
		t.Errorf("release without a secret: %s", r)
	}

	// Release frees it; a second release fails clearly.
	r = n.release(text)
	if r.code != 0 || strings.TrimSpace(r.stdout) != fmt.Sprintf("released lease %d", text.LeaseID) {
		t.Fatalf("release: %s", r)
	}
	if g := n.status("db/main"); g.Holder != nil {
		t.Errorf("db/main still held after release: %v", g.Holder)
	}
	r = n.release(text)
	if r.code == 0 || !strings.Contains(r.stderr, "gone") {
		t.Errorf("second release: want a non-zero status and a message saying the lease is gone: %s", r)
	}

	// The secret may come from LEASEHOLD_SECRET instead of the command line.
	r = lhEnv(t, childEnv("LEASEHOLD_SECRET="+multi.Secret), "release", "--endpoints", n.url,
		"--lease", strconv.FormatUint(multi.LeaseID, 10))
	if r.code != 0 {
		t.Errorf("release with LEASEHOLD_SECRET: %s", r)
	}

	// LEASEHOLD_ENDPOINTS instead of --endpoints, and --endpoints over it.
	env := childEnv("LEASEHOLD_ENDPOINTS=" + n.url)
	if r := lhEnv(t, env, "acquire", "--ttl", "1m", "env/1"); r.code != 0 {
		t.Errorf("acquire with LEASEHOLD_ENDPOINTS: %s", r)
	} else {
		secrets = append(secrets, parseText(r.stdout)["secret"])
	}
	if r := lhEnv(t, env, "status", "env/1"); r.code != 0 || !strings.Contains(r.stdout, "env/1: held by lease") {
		t.Errorf("status with LEASEHOLD_ENDPOINTS: %s", r)
	}
	dead := "http://" + freeAddr(t)
	if r := lhEnv(t, childEnv("LEASEHOLD_ENDPOINTS="+dead), "status", "--endpoints", n.url, "env/1"); r.code != 0 {
		t.Errorf("--endpoints should win over LEASEHOLD_ENDPOINTS: %s", r)
	}
	// Two endpoints, the first one dead: the client moves on.
	if r := lhEnv(t, childEnv(), "status", "--endpoints", dead+","+n.url, "env/1"); r.code != 0 {
		t.Errorf("status with a dead first endpoint: %s", r)
	}

	// Input errors are reported, not hidden.
	if r := n.lh("acquire", "--ttl", "10ms", "bad/ttl"); r.code == 0 || !strings.Contains(r.stderr, "ttl") {
		t.Errorf("acquire --ttl 10ms: %s", r)
	}

	// Invariant 9: no secret in inspection output or in the server's log.
	inspect := n.lhOK("list").stdout + n.lhOK("list", "--json").stdout + n.lhOK("status", "--json", "env/1").stdout
	serveLog, _ := os.ReadFile(n.p.ErrPath)
	for _, s := range secrets {
		if strings.Contains(inspect, s) {
			t.Errorf("a lease secret appears in list/status output")
		}
		if bytes.Contains(serveLog, []byte(s)) {
			t.Errorf("a lease secret appears in the server's log")
		}
	}
}

// TestCurlAcquire: the curl example from the issue works as written.
func TestCurlAcquire(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	// curl -H 'Content-Type: application/json' -d '{"resources":["demo"],"ttl":"10s"}' \
	//   http://127.0.0.1:P/leasehold.v1.Leases/Acquire
	code, body, err := n.post("Acquire", `{"resources":["demo"],"ttl":"10s"}`)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", code, body)
	}
	var resp struct {
		Lease struct {
			ID        string   `json:"id"`
			Token     string   `json:"token"`
			Resources []string `json:"resources"`
			TTL       string   `json:"ttl"`
		} `json:"lease"`
		Secret    string `json:"secret"`
		ExpiresIn string `json:"expiresIn"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	tok, err := strconv.ParseUint(resp.Lease.Token, 10, 64)
	if err != nil || tok == 0 {
		t.Fatalf("lease.token %q is not a positive number: %s", resp.Lease.Token, body)
	}
	if !slices.Equal(resp.Lease.Resources, []string{"demo"}) || resp.Lease.TTL != "10s" {
		t.Errorf("lease: %s", body)
	}
	// No secret was sent, so the node made one and returned it.
	if !secretRE.MatchString(resp.Secret) {
		t.Errorf("secret %q: want 32 hex digits", resp.Secret)
	}

	// The CLI sees the same lease, and can release it with the secret.
	g := n.status("demo")
	if g.Holder == nil || g.Holder.Token != tok || strconv.FormatUint(g.Holder.LeaseID, 10) != resp.Lease.ID {
		t.Fatalf("status demo: holder %v, want lease %s token %d", g.Holder, resp.Lease.ID, tok)
	}
	n.lhOK("release", "--lease", resp.Lease.ID, "--secret", resp.Secret)

	// A bad request gets a Connect error with a message, not a 200.
	code, body, err = n.post("Acquire", `{"resources":[],"ttl":"10s"}`)
	if err != nil || code != http.StatusBadRequest || !bytes.Contains(body, []byte("invalid_argument")) {
		t.Errorf("empty resources: HTTP %d %s (%v), want 400 invalid_argument", code, body, err)
	}
}
