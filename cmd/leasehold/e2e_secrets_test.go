package main_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/server"
)

// TestSecretsStaySecret acquires with a known secret under bearer-token
// auth, drives every operator surface, and finds neither the secret nor
// any bearer token in inspection output (text and JSON), the audit log,
// /metrics, or the server's own debug logs (invariant 9).
func TestSecretsStaySecret(t *testing.T) {
	const (
		secret      = "5ec4e75ec4e75ec4e75ec4e75ec4e75e"
		workerTok   = "wrk-7f3a9c1e5b2d8f4a6c0e9b7d5f3a1c8e"
		adminTok    = "adm-2b8d4f6a0c9e7b5d3f1a8c6e4b2d0f9a"
		wrongSecret = "00000000000000000000000000000001"
		idemSecret  = "1de05ec41de05ec41de05ec41de05ec4"
		idemResult  = "idem-result-body-9d2c"
		queueBody   = "queue-message-body-5b1e"
	)
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.json")
	auth := fmt.Sprintf(`{"tokens":[
		{"name":"ci-worker","sha256":%q,"role":"worker","prefixes":["jobs/"]},
		{"name":"alice","sha256":%q,"role":"admin"}]}`, server.HashToken(workerTok), server.HashToken(adminTok))
	if err := os.WriteFile(authFile, []byte(auth), 0o600); err != nil {
		t.Fatal(err)
	}
	adminTokFile := filepath.Join(dir, "admin-token")
	os.WriteFile(adminTokFile, []byte(adminTok+"\n"), 0o600)

	n := newNode(t)
	n.args = []string{"--auth-file", authFile, "--log-level", "debug", "--log-format", "json"}
	n.start()

	call := func(token, procedure, body string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", n.url+procedure, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("HTTP %d %s", resp.StatusCode, b)
	}
	acq := call(workerTok, "/leasehold.v1.Leases/Acquire",
		fmt.Sprintf(`{"resources":["jobs/x"],"ttl":"60s","secret":%q,"owner":"w1","operation":"nightly"}`, secret))
	if !strings.Contains(acq, "HTTP 200") {
		t.Fatalf("acquire: %s", acq)
	}
	var leaseID uint64
	fmt.Sscanf(acq[strings.Index(acq, `"id":"`)+6:], "%d", &leaseID)
	var outputs []string
	add := func(what, s string) { outputs = append(outputs, what+":\n"+s) }
	add("renew", call(workerTok, "/leasehold.v1.Leases/Renew", fmt.Sprintf(`{"leaseId":"%d","secret":%q,"progress":"rows 1-10"}`, leaseID, secret)))
	add("renew with a wrong secret", call(workerTok, "/leasehold.v1.Leases/Renew", fmt.Sprintf(`{"leaseId":"%d","secret":%q}`, leaseID, wrongSecret)))
	add("worker inspecting", call(workerTok, "/leasehold.v1.Leases/Get", `{"resource":"jobs/x"}`))

	// An idempotency key completed with a result body only its owner may read.
	begin := call(workerTok, "/leasehold.v1.Idempotency/Begin",
		fmt.Sprintf(`{"key":"jobs/pay-1","fingerprint":"YW1vdW50PTEw","attemptTtl":"30s","secret":%q}`, idemSecret))
	var attempt uint64
	fmt.Sscanf(begin[strings.Index(begin, `"attempt":"`)+11:], "%d", &attempt)
	if complete := call(workerTok, "/leasehold.v1.Idempotency/Complete", fmt.Sprintf(`{"key":"jobs/pay-1","attempt":"%d","secret":%q,"result":%q}`,
		attempt, idemSecret, base64.StdEncoding.EncodeToString([]byte(idemResult)))); !strings.Contains(complete, "HTTP 200") {
		t.Fatalf("idempotency: %s / %s", begin, complete)
	}
	// A queued message whose body is the application's.
	if created := call(adminTok, "/leasehold.v1.Queues/Create", `{"queue":"jobs/q","settings":{"maxReceives":1}}`); !strings.Contains(created, "HTTP 200") {
		t.Fatalf("create a queue: %s", created)
	}
	for _, key := range []string{"k1", "k2"} {
		if sent := call(workerTok, "/leasehold.v1.Queues/Send", fmt.Sprintf(`{"queue":"jobs/q","key":%q,"body":%q}`,
			key, base64.StdEncoding.EncodeToString([]byte(queueBody)))); !strings.Contains(sent, "HTTP 200") {
			t.Fatalf("send: %s", sent)
		}
	}
	// Two messages: one stays in flight, the other dies (one receive
	// allowed), so the dashboard has a delivery and a dead letter to show.
	recv := call(workerTok, "/leasehold.v1.Queues/Receive", `{"queue":"jobs/q","max":2,"consumer":"queue-consumer-7"}`)
	var seq, tok uint64
	fmt.Sscanf(recv[strings.Index(recv, `"sequence":"`)+12:], "%d", &seq)
	fmt.Sscanf(recv[strings.Index(recv, `"token":"`)+9:], "%d", &tok)
	if nack := call(workerTok, "/leasehold.v1.Queues/Nack", fmt.Sprintf(`{"queue":"jobs/q","sequence":"%d","token":"%d","consumer":"queue-consumer-7","error":"boom"}`, seq, tok)); !strings.Contains(nack, "HTTP 200") {
		t.Fatalf("receive %s; nack: %s", recv, nack)
	}
	dashboardPages := func(when string) {
		t.Helper()
		for what, s := range dashboard(t, n.url, adminTok) {
			add("dashboard "+what+" "+when, s)
		}
	}
	dashboardPages("while held")

	env := append(childEnv(), "LEASEHOLD_TOKEN_FILE="+adminTokFile)
	cli := func(args ...string) {
		t.Helper()
		r := lhEnv(t, env, append([]string{args[0], "--endpoints", n.url}, args[1:]...)...)
		if r.code != 0 {
			t.Fatalf("leasehold %s: %s", strings.Join(args, " "), r)
		}
		add("leasehold "+strings.Join(args, " "), r.stdout+r.stderr)
	}
	cli("locks")
	cli("locks", "--json")
	cli("locks", "show", "jobs/x")
	cli("locks", "show", "jobs/x", "--json")
	cli("status", "jobs/x", "--json")
	cli("list", "--json")
	cli("force-release", "jobs/x", "--lease", fmt.Sprint(leaseID), "--reason", "secrets test", "--yes")
	cli("audit")
	cli("audit", "--json")
	dashboardPages("after the forced release")
	add("release after the forced release", call(workerTok, "/leasehold.v1.Leases/Release", fmt.Sprintf(`{"leaseId":"%d","secret":%q}`, leaseID, secret)))

	status, metrics := metricsGet(t, n.url+"/metrics", adminTok)
	if status != http.StatusOK {
		t.Fatalf("/metrics with the admin token: %d %.200s", status, metrics)
	}
	add("/metrics", metrics)

	n.signal(syscall.SIGTERM)
	if !n.p.Wait(10 * time.Second) {
		t.Fatal("serve did not stop")
	}
	add("server log", n.p.Stdout()+n.p.Stderr())
	if !strings.Contains(n.p.Stderr(), "force") {
		t.Fatalf("the server log does not mention the forced release; is it logging at all?\n%s", n.p.Stderr())
	}

	for _, o := range outputs {
		for name, s := range map[string]string{"the lease secret": secret, "the worker token": workerTok, "the admin token": adminTok, "the wrong secret": wrongSecret,
			"the idempotency secret": idemSecret, "the idempotency result": idemResult,
			"the idempotency result in base64": base64.StdEncoding.EncodeToString([]byte(idemResult)),
			"a queued message's body":          queueBody, "a queued message's body in base64": base64.StdEncoding.EncodeToString([]byte(queueBody))} {
			if strings.Contains(o, s) {
				t.Errorf("%s appears in %s", name, o[:strings.Index(o, ":\n")])
			}
		}
	}
	all := strings.Join(outputs, "\n")
	for _, want := range []string{"nightly", "jobs/pay-1", "secrets test", "queue-consumer-7", "boom"} {
		if !strings.Contains(all, want) {
			t.Errorf("the dashboard's pages never show %q; are they showing anything?", want)
		}
	}
	if !strings.Contains(all, "secrets test") {
		t.Fatal("the audit output does not hold the forced release's reason")
	}
}

// dashboard logs into the dashboard at url with token, as a browser does
// (form, cookie), and fetches every page and data fragment; it returns
// each response's headers and body by path. The login answer's own
// Set-Cookie, which carries the token by design, is left out.
func dashboard(t *testing.T, url, token string) map[string]string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	br := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	out := map[string]string{}
	fetch := func(path string) string {
		t.Helper()
		resp, err := br.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var h strings.Builder
		resp.Header.Write(&h)
		out[path] = fmt.Sprintf("HTTP %d\n%s\n%s", resp.StatusCode, h.String(), b)
		return string(b)
	}
	login := fetch("/ui/login")
	i := strings.Index(login, `name="csrf" value="`)
	if i < 0 {
		t.Fatalf("the dashboard's login form has no form token:\n%s", login)
	}
	csrf := login[i+19 : i+51]
	resp, err := br.PostForm(url+"/ui/login", neturl.Values{"csrf": {csrf}, "token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	out["POST /ui/login (body)"] = string(b)
	for _, path := range []string{"/ui/leases", "/ui/leases/rows", "/ui/lease?resource=jobs/x", "/ui/force-release?resource=jobs/x",
		"/ui/lease?resource=jobs/pay-1", "/ui/elections", "/ui/idempotency", "/ui/idempotency?prefix=jobs/", "/ui/queues", "/ui/queue?name=jobs/q", "/ui/groups", "/ui/cluster",
		"/ui/cluster/rows", "/ui/audit", "/ui/audit?since=24h", "/ui/charts", "/ui/charts/svg"} {
		fetch(path)
	}
	return out
}
