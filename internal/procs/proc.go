package procs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// exitTimeout bounds the reaping of a SIGKILLed process.
const exitTimeout = 10 * time.Second

// Proc is a child process whose output goes to files (so a grandchild that
// keeps them open cannot block Wait).
type Proc struct {
	Name     string
	Cmd      *exec.Cmd
	OutPath  string
	ErrPath  string
	Done     chan struct{} // closed once reaped
	Err      error         // Wait's error, valid after Done
	ExitedAt time.Time     // when Wait returned, valid after Done
}

// Start starts bin with args, its output in dir/name.stdout and
// dir/name.stderr. When the test ends the process is SIGKILLed (after a
// SIGCONT, in case it was stopped) and reaped, and a data race it reported
// fails the test. It returns errors rather than fail t, so that a subtest
// may start a process its parent test owns.
func Start(t testing.TB, dir, name string, env []string, bin string, args ...string) (*Proc, error) {
	p := &Proc{Name: name, OutPath: filepath.Join(dir, name+".stdout"), ErrPath: filepath.Join(dir, name+".stderr"),
		Done: make(chan struct{})}
	stdout, err := os.Create(p.OutPath)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(p.ErrPath)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Stdout, p.Cmd.Stderr, p.Cmd.Env = stdout, stderr, env
	if err := p.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.Err = p.Cmd.Wait()
		p.ExitedAt = time.Now()
		close(p.Done)
	}()
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Error(err)
		}
		for _, path := range []string{p.OutPath, p.ErrPath} {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte("WARNING: DATA RACE")) {
				t.Errorf("%s reported a data race:\n%s", name, b)
			}
		}
	})
	return p, nil
}

func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited reports whether the process has been reaped.
func (p *Proc) Exited() bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}

// Wait waits up to timeout for the process to be reaped.
func (p *Proc) Wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.Done:
		return true
	case <-t.C:
		return false
	}
}

// Signal sends sig, or says that the process has already exited.
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return fmt.Errorf("%s already exited: %v", p.Name, p.Err)
	}
	return p.Cmd.Process.Signal(sig)
}

// Kill SIGKILLs the process (waking it first, if stopped) and reaps it.
func (p *Proc) Kill() error {
	if p.Exited() {
		return nil
	}
	p.Cmd.Process.Signal(syscall.SIGCONT)
	p.Cmd.Process.Kill()
	if !p.Wait(exitTimeout) {
		return fmt.Errorf("%s (pid %d) not reaped %v after SIGKILL", p.Name, p.Pid(), exitTimeout)
	}
	return nil
}

// Code is the exit status (-1 if killed by a signal); only after Done.
func (p *Proc) Code() int { return p.Cmd.ProcessState.ExitCode() }

func (p *Proc) Stdout() string { b, _ := os.ReadFile(p.OutPath); return string(b) }
func (p *Proc) Stderr() string { b, _ := os.ReadFile(p.ErrPath); return string(b) }
