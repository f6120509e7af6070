package main_test

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/server"
)

// TestBearerTokenFromFlagEnvironmentOrFile: a client command takes its
// bearer token from --auth-token, --token-file, LEASEHOLD_AUTH_TOKEN or
// LEASEHOLD_TOKEN_FILE, the first of those set (the command line over the
// environment, a token over a file); without one, the node's refusal says
// how to give one. No token ever shows in what the CLI prints — results,
// errors, help, doctor's report — nor in the traces it sends.
func TestBearerTokenFromFlagEnvironmentOrFile(t *testing.T) {
	t.Parallel()
	const (
		adminTok = "adm-6d0a4b2c8e1f3a5b7c9d0e2f4a6b8c1d"
		wrongTok = "wrong-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
	)
	dir := t.TempDir()
	authFile, adminFile, wrongFile := filepath.Join(dir, "auth.json"), filepath.Join(dir, "admin-token"), filepath.Join(dir, "wrong-token")
	for path, body := range map[string]string{
		authFile:  fmt.Sprintf(`{"tokens":[{"name":"alice","sha256":%q,"role":"admin"}]}`, server.HashToken(adminTok)),
		adminFile: adminTok + "\n", wrongFile: wrongTok + "\n",
	} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n := newNode(t)
	n.args = []string{"--auth-file", authFile}
	n.start()
	col := newCollector()
	collector := httptest.NewServer(col)
	t.Cleanup(collector.Close)

	printed := map[string]string{} // everything the CLI printed, by command (tokens left out), to search for the tokens
	run := func(env []string, args ...string) cliResult {
		t.Helper()
		r := lhEnv(t, childEnv(env...), append([]string{args[0], "--endpoints", n.url}, args[1:]...)...)
		printed[fmt.Sprintf("%d: %s", len(printed), strings.NewReplacer(adminTok, "ADMIN", wrongTok, "WRONG").Replace(strings.Join(args, " ")))] =
			r.stdout + r.stderr
		return r
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want int
	}{
		{"--auth-token", nil, []string{"--auth-token", adminTok}, 0},
		{"--token-file", nil, []string{"--token-file", adminFile}, 0},
		{"LEASEHOLD_AUTH_TOKEN", []string{"LEASEHOLD_AUTH_TOKEN=" + adminTok}, nil, 0},
		{"LEASEHOLD_TOKEN_FILE", []string{"LEASEHOLD_TOKEN_FILE=" + adminFile}, nil, 0},
		{"--auth-token over the variables", []string{"LEASEHOLD_AUTH_TOKEN=" + wrongTok, "LEASEHOLD_TOKEN_FILE=" + wrongFile},
			[]string{"--auth-token", adminTok}, 0},
		{"--token-file over the variables", []string{"LEASEHOLD_AUTH_TOKEN=" + wrongTok}, []string{"--token-file", adminFile}, 0},
		{"LEASEHOLD_AUTH_TOKEN over LEASEHOLD_TOKEN_FILE", []string{"LEASEHOLD_AUTH_TOKEN=" + adminTok, "LEASEHOLD_TOKEN_FILE=" + wrongFile}, nil, 0},
		{"a wrong --auth-token is not replaced by a right variable", []string{"LEASEHOLD_AUTH_TOKEN=" + adminTok},
			[]string{"--auth-token", wrongTok}, 8},
		{"--auth-token and --token-file at once", nil, []string{"--auth-token", adminTok, "--token-file", adminFile}, 2},
		{"a token with a space", nil, []string{"--auth-token", adminTok + " " + wrongTok}, 2},
		{"no token", nil, nil, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(tc.env, append(append([]string{"locks"}, tc.args...), "--prefix", "jobs/")...)
			if r.code != tc.want {
				t.Errorf("exit %d, want %d\n%s", r.code, tc.want, r)
			}
		})
	}

	// The refusals say what to do, naming where the refused token came from.
	r := run(nil, "status", "jobs/a")
	for _, want := range []string{"--auth-token", "LEASEHOLD_AUTH_TOKEN", "--token-file"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("status without a token: the message does not mention %s\n%s", want, r)
		}
	}
	if r := run(nil, "status", "jobs/a", "--token-file", wrongFile); !strings.Contains(r.stderr, "refused the token from --token-file "+wrongFile) {
		t.Errorf("status with a wrong token: want the refusal to name its file\n%s", r)
	}
	// Other places a token could show: help with a token in the
	// environment, doctor's report, an unreachable node, a missing file,
	// and the command's traces.
	tokenEnv := []string{"LEASEHOLD_AUTH_TOKEN=" + adminTok}
	run(tokenEnv, "status", "--help")
	run(tokenEnv, "doctor", "--max-pause", "1s", "--window", "300ms")
	run(tokenEnv, "doctor", "--max-pause", "1s", "--window", "300ms", "-o", "json")
	run(nil, "status", "jobs/a", "--auth-token", wrongTok, "--endpoints", "http://"+freeAddr(t), "--timeout", "1s")
	run([]string{"LEASEHOLD_TOKEN_FILE=" + filepath.Join(dir, "no-such-file")}, "status", "jobs/a")
	if r := run(tokenEnv, "acquire", "jobs/traced", "--otlp-endpoint", collector.URL); r.code != 0 {
		t.Fatalf("acquire with tracing: %s", r)
	}
	col.mu.Lock()
	exports := bytes.Join(col.raw, nil)
	col.mu.Unlock()
	if len(exports) == 0 {
		t.Fatal("the CLI sent no traces: nothing to search for the token")
	}
	for name, tok := range map[string][]byte{"the admin token": []byte(adminTok), "the wrong token": []byte(wrongTok)} {
		if bytes.Contains(exports, tok) {
			t.Errorf("%s is in the traces the CLI sent", name)
		}
		for command, out := range printed {
			if strings.Contains(out, string(tok)) {
				t.Errorf("%s shows in the output of leasehold %s:\n%s", name, command, out)
			}
		}
	}
}
