package httpfence_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"

	"github.com/leasehold/leasehold/internal/testutil"
)

// One Postgres for the package's tests of the Postgres-backed store, started
// on first use: most tests here need none, and fuzz workers (each a copy of
// the test binary) should not start one each.
var (
	pgOnce sync.Once
	pgSrv  *pgtest.Server
	pgStop func()
)

func pg() *pgtest.Server {
	pgOnce.Do(func() { pgSrv, pgStop = pgtest.StartMain() })
	return pgSrv
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pgStop != nil {
		pgStop()
	}
	os.Exit(code)
}

var testCtx = testutil.Context

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// reply is a response, read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t tb) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not JSON: %v", r.body, err)
	}
	return m
}

func do(t tb, c *http.Client, req *http.Request) reply {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}
