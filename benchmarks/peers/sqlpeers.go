package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// pgServer is a throwaway PostgreSQL server for the queue and idempotency
// comparisons, started as internal/pgtest starts one (initdb and pg_ctl,
// as user postgres when this runs as root) but durable as a user would run
// it: fsync, synchronous_commit and full_page_writes stay on (the
// defaults).
type pgServer struct {
	binDir, dir string
	port        int
	runAs       *user.User
	dsn         string
}

func startPostgres(binDir, dir string) (*pgServer, error) {
	if binDir == "" {
		for _, d := range []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"} {
			if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
				binDir = d
				break
			}
		}
		if binDir == "" {
			p, err := exec.LookPath("initdb")
			if err != nil {
				return nil, fmt.Errorf("PostgreSQL binaries not found (give -pg-bin DIR, or apt-get install postgresql)")
			}
			r, _ := filepath.EvalSymlinks(p)
			binDir = filepath.Dir(r)
		}
	}
	s := &pgServer{binDir: binDir, dir: filepath.Join(dir, "postgres")}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root: PostgreSQL needs a postgres user to run as: %w", err)
		}
		s.runAs = u
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		// The work dir's parents must be passable by postgres.
		for d := s.dir; d != "/" && d != "."; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				os.Chmod(d, fi.Mode().Perm()|0o011)
			}
		}
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	s.port = ports[0]
	conf := fmt.Sprintf("\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nmax_connections = 300\n", s.dir)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	f.WriteString(conf)
	f.Close()
	if out, err := s.run("pg_ctl", "start", "-D", data, "-l", filepath.Join(s.dir, "postgres.log"), "-w", "-t", "30",
		"-o", "-p "+strconv.Itoa(s.port)); err != nil {
		s.stop()
		return nil, fmt.Errorf("pg_ctl start: %w\n%s", err, out)
	}
	s.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		c, err := pgx.Connect(ctx, s.dsn)
		if err == nil {
			c.Close(ctx)
			return s, nil
		}
		if ctx.Err() != nil {
			s.stop()
			return nil, fmt.Errorf("postgres not ready: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *pgServer) run(bin string, args ...string) ([]byte, error) {
	path := filepath.Join(s.binDir, bin)
	var cmd *exec.Cmd
	if s.runAs != nil {
		cmd = exec.Command("runuser", append([]string{"-u", s.runAs.Username, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.Bytes(), err
}

func (s *pgServer) stop() {
	s.run("pg_ctl", "stop", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "-t", "30")
}

// postmaster is the server's first process (postmaster.pid's first line).
func (s *pgServer) postmaster() int {
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid
}

// cpu is what the postmaster and its children (the backends, WAL writer,
// checkpointer, autovacuum) have used, those already ended included.
func (s *pgServer) cpu() time.Duration {
	pm := s.postmaster()
	if pm == 0 {
		return 0
	}
	t := procCPU(pm) + procChildrenCPU(pm)
	for _, pid := range childrenOf(pm) {
		t += procCPU(pid)
	}
	return t
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// redisServer is a redis-server with its append-only file fsync'd before
// every reply (appendfsync always), RDB snapshots off.
type redisServer struct {
	cmd  *exec.Cmd
	addr string
}

func startRedis(bin, dir string) (*redisServer, error) {
	d := filepath.Join(dir, "redis")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	logf, err := os.Create(filepath.Join(d, "redis.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--dir", d,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
		"--protected-mode", "no", "--maxclients", "1000")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	logf.Close()
	s := &redisServer{cmd: cmd, addr: addr}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for start := time.Now(); ; {
		if err := c.Ping(context.Background()).Err(); err == nil {
			return s, nil
		} else if time.Since(start) > 30*time.Second {
			s.stop()
			return nil, fmt.Errorf("redis not ready: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *redisServer) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

func (s *redisServer) cpu() time.Duration { return procCPU(s.cmd.Process.Pid) }
