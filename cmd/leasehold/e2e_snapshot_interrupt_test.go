package main_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slowRelay relays TCP connections on loopback to target, passing the
// target's answers on 256 bytes per 50ms, so a stream is still under way
// when the test interrupts its reader. It returns its URL.
func slowRelay(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				buf := make([]byte, 256)
				for {
					n, err := up.Read(buf)
					if _, werr := c.Write(buf[:n]); werr != nil || err != nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestE2ESnapshotSaveInterrupted: `snapshot save FILE` interrupted (SIGINT)
// while the state streams in exits 1 and leaves neither FILE nor FILE.tmp.
func TestE2ESnapshotSaveInterrupted(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	// save streams from the leader's advertised URL: the relay's.
	relay := slowRelay(t, n.apiAddr)
	n.args = []string{"--advertise-api", relay}
	n.start()
	for i := range 10 { // about 20 KB of state that does not compress: seconds through the relay
		n.lhOK("kv", "put", fmt.Sprintf("big/%d", i), randomText(2000))
	}
	file := filepath.Join(t.TempDir(), "backup.lhs")
	p := startProc(t, n.dir, "save", childEnv(), "snapshot", "save", "--endpoints", relay, file)
	checkFor(t, 10*time.Second, func() error {
		if _, err := os.Stat(file + ".tmp"); err != nil {
			return fmt.Errorf("no %s.tmp yet (exited %v, stderr %q)", file, p.Exited(), p.Stderr())
		}
		return nil
	})
	p.Cmd.Process.Signal(syscall.SIGINT)
	if !p.Wait(exitTimeout) || p.Code() != 1 {
		t.Fatalf("snapshot save after SIGINT: exited=%v code=%d stderr=%q; want exit 1", p.Exited(), p.Code(), p.Stderr())
	}
	for _, f := range []string{file, file + ".tmp"} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after an interrupted save: %v, want it absent", f, err)
		}
	}
}

// randomText is n characters that do not compress.
func randomText(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(rand.Text())
	}
	return b.String()[:n]
}
