// Package pgtest starts a throwaway PostgreSQL server for tests.
//
// The server is real (initdb + pg_ctl from a local PostgreSQL 15
// installation), listens only on 127.0.0.1 on a free port, trusts every
// loopback connection, runs with fsync off, and lives in a temporary
// directory that is removed when it stops. Missing binaries are a test
// failure, not a skip: CI must run these tests, and a silent skip would hide
// that it did not.
//
// PostgreSQL refuses to run as root. When the tests run as root (as they do
// in CI containers) the binaries run as the "postgres" user via runuser, in a
// directory chowned to that user.
//
// One server per test:
//
//	srv := pgtest.Start(t)
//	dsn := srv.NewDatabase(t)
//
// One server per package, shared by every test:
//
//	var srv *pgtest.Server
//
//	func TestMain(m *testing.M) {
//		var stop func()
//		srv, stop = pgtest.StartMain()
//		code := m.Run()
//		stop()
//		os.Exit(code)
//	}
//
// Set PGTEST_BINDIR to use binaries from a directory other than
// /usr/lib/postgresql/15/bin or $PATH.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/freeport"
)

// Bounds on every wait, so a broken installation fails a test instead of
// hanging it until the go test timeout.
const (
	readyTimeout = 30 * time.Second // pg_ctl start -w and the first connection
	stepTimeout  = 60 * time.Second // any single initdb/pg_ctl invocation
	stopTimeout  = 30 * time.Second
	startTries   = 3 // a port picked free can be taken before postgres binds it
)

// Server is a running PostgreSQL server. Its methods are safe for concurrent
// use.
type Server struct {
	err     error // set when StartMain could not start the server
	dir     string
	port    int
	binDir  string
	runAs   *user.User // nil: run binaries as the current user
	dbSeq   atomic.Uint64
	stopped atomic.Bool
}

// Start starts a server for one test and stops it when the test ends. It
// fails the test (never skips it) if the server cannot be started.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return s
}

// StartMain starts a server to share among a package's tests, for use in
// TestMain. Call stop after m.Run. If the server cannot be started, the error
// is printed to stderr and kept: every test that then calls NewDatabase fails
// with it, while tests that need no database still run.
func StartMain() (s *Server, stop func()) {
	s, err := start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		return &Server{err: err}, func() {}
	}
	return s, func() {
		if err := s.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
	}
}

// Err reports why StartMain could not start the server, or nil.
func (s *Server) Err() error { return s.err }

// Port is the TCP port the server listens on at 127.0.0.1.
func (s *Server) Port() int { return s.port }

// DSN returns a connection URL for the "postgres" database as the superuser
// "postgres". It is empty if the server failed to start.
func (s *Server) DSN() string {
	if s.err != nil {
		return ""
	}
	return s.dsn("postgres")
}

// DatabaseDSN returns a connection URL for the named database, for a database
// made some other way than NewDatabase.
func (s *Server) DatabaseDSN(name string) string {
	if s.err != nil {
		return ""
	}
	return s.dsn(name)
}

func (s *Server) dsn(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// NewDatabase creates an empty database for the test, drops it when the test
// ends, and returns its DSN.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	if s.err != nil {
		t.Fatalf("pgtest: no server: %v", s.err)
	}
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), s.dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := s.admin(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		if s.stopped.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		// FORCE ends connections the test forgot to close.
		if err := s.admin(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	return s.dsn(name)
}

func (s *Server) admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.dsn("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// Stop stops the server at once (no checkpoint: the data is thrown away) and
// removes its directory. Calling it again does nothing.
func (s *Server) Stop() error {
	if s.err != nil || s.stopped.Swap(true) {
		return nil
	}
	return errors.Join(s.stopServer(), os.RemoveAll(s.dir))
}

func (s *Server) stopServer() error {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout+10*time.Second)
	defer cancel()
	out, err := s.run(ctx, "pg_ctl", "stop", "-D", s.dataDir(), "-m", "immediate",
		"-w", "-t", strconv.Itoa(int(stopTimeout/time.Second)))
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) logFile() string { return filepath.Join(s.dir, "postgres.log") }

func start() (_ *Server, err error) {
	binDir, err := findBinDir()
	if err != nil {
		return nil, err
	}
	s := &Server{binDir: binDir}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("runuser"); err != nil {
			return nil, errors.New("running as root, and PostgreSQL refuses to run as root; runuser (util-linux) is needed to run it as user postgres but is not on PATH")
		}
		s.runAs, err = user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, and PostgreSQL refuses to run as root; need a \"postgres\" user to run it as: %w", err)
		}
	}

	// A unix socket path must fit in 107 bytes; a long $TMPDIR would break it.
	base := os.TempDir()
	if len(base) > 64 {
		base = "/tmp"
	}
	s.dir, err = os.MkdirTemp(base, "pgtest-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(s.dir)
		}
	}()
	if s.runAs != nil {
		uid, _ := strconv.Atoi(s.runAs.Uid)
		gid, _ := strconv.Atoi(s.runAs.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return nil, err
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if out, err := s.run(ctx, "initdb", "-D", s.dataDir(), "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}

	// The port goes on pg_ctl's command line so a retry can pick another one.
	conf := fmt.Sprintf(`
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
track_commit_timestamp = on
`, strings.ReplaceAll(s.dir, "'", "''"))
	f, err := os.OpenFile(filepath.Join(s.dataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(conf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}

	var startErr error
	for try := 0; try < startTries; try++ {
		if s.port, err = freeport.Port(); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		out, err := s.run(ctx, "pg_ctl", "start", "-D", s.dataDir(), "-l", s.logFile(),
			"-w", "-t", strconv.Itoa(int(readyTimeout/time.Second)), "-o", "-p "+strconv.Itoa(s.port))
		cancel()
		if err == nil {
			startErr = nil
			break
		}
		startErr = fmt.Errorf("pg_ctl start: %w\n%s\n--- server log ---\n%s", err, out, s.logTail())
		// A server that came up too late for -w would hold the data
		// directory against the next try, and outlive the test.
		s.stopServer()
	}
	if startErr != nil {
		return nil, startErr
	}
	if err := s.waitReady(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady connects until a query succeeds. pg_ctl -w already waited for the
// postmaster, so this normally succeeds at once; it guards against the TCP
// listener lagging the "ready" status.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = s.admin(ctx, "SELECT 1")
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("server on port %d not ready after %v: %w\n--- server log ---\n%s",
		s.port, readyTimeout, err, s.logTail())
}

// run runs one of the PostgreSQL binaries, as user postgres when we are root.
func (s *Server) run(ctx context.Context, bin string, args ...string) ([]byte, error) {
	path := filepath.Join(s.binDir, bin)
	var cmd *exec.Cmd
	if s.runAs != nil {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", s.runAs.Username, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	// The test's working directory may not be readable by user postgres.
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// pg_ctl -l sends the server's output to the log file, but if anything
	// ever inherited our pipe, Wait would block for the server's lifetime.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.Bytes(), err
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logFile())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// findBinDir finds a directory holding initdb, pg_ctl and postgres.
func findBinDir() (string, error) {
	var candidates []string
	if d := os.Getenv("PGTEST_BINDIR"); d != "" {
		candidates = append(candidates, d)
	}
	candidates = append(candidates, "/usr/lib/postgresql/15/bin")
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(r))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, d := range candidates {
		if hasBinaries(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL binaries (initdb, pg_ctl, postgres) not found in %s; "+
		"install PostgreSQL 15 (Debian/Ubuntu: apt-get install postgresql-15) or set PGTEST_BINDIR",
		strings.Join(append(candidates, "$PATH"), ", "))
}

func hasBinaries(dir string) bool {
	for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}
