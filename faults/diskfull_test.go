package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	hist "github.com/leasehold/leasehold/internal/history"
)

// tmpfsSize holds one 64 MiB log segment (preallocated when the node
// starts, or when it moves to the next one) and the filler; deleting the
// filler makes room for the next segment.
const tmpfsSize = "160m"

// TestDiskFull runs a single node on a small tmpfs it mounts, fills the
// disk with a filler file, writes until the log needs space it cannot get
// (its next segment), then deletes the filler, as an operator would,
// restarting the node only if it exited. The node must acknowledge writes
// again, and nothing it acknowledged before may be lost.
func TestDiskFull(t *testing.T) {
	const scenario = "disk-full"
	if os.Geteuid() != 0 {
		t.Skipf("%s needs root to mount a size-limited tmpfs (uid %d): skipped", scenario, os.Geteuid())
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := mountTmpfs(t, mnt, tmpfsSize); err != nil {
		t.Skipf("%s: cannot mount a tmpfs here: %v", scenario, err)
	}
	h := &history{}
	n := newNode(t, "n1", filepath.Join(mnt, "data"))
	c := newClient(t, "", n.url)
	err := diskFull(t, n, c, h, mnt)
	finish(t, scenario, h, c, expect{}, err)
}

// mountTmpfs mounts a tmpfs of size at dir, unmounted when the test ends
// (after the processes using it, whose cleanups run first).
func mountTmpfs(t testing.TB, dir, size string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return nil
}

// fill writes path until the file system has no space left.
func fill(path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	var n int64
	for {
		k, err := f.Write(chunk)
		n += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func diskFull(t *testing.T, n *node, c *client.Client, h *history, mnt string) error {
	if err := n.start(); err != nil {
		return err
	}
	w := startWorkload(c, h, "disk-full", 2)
	defer w.stop()
	if err := w.waitAcks(10, progressTimeout); err != nil {
		return fmt.Errorf("before the disk filled: %w", err)
	}
	filler := filepath.Join(mnt, "filler")
	size, err := fill(filler)
	if err != nil {
		return fmt.Errorf("fill the disk: %w", err)
	}
	start := time.Now()
	t.Logf("filled the disk with %d MiB", size>>20)

	// Large values fill the log's current segment quickly; the next one
	// cannot be made.
	firstErr, big := writeUntilRefused(c, h)
	if firstErr == nil {
		return fmt.Errorf("%d large writes were all acknowledged on a full disk: the log never needed space", big)
	}
	t.Logf("%d large writes acknowledged in %v, then: %v", big, time.Since(start).Round(time.Second), firstErr)

	if err := os.Remove(filler); err != nil {
		return err
	}
	// A supervisor restarts the node whenever it finds it exited (it may
	// stop on the full disk, or later).
	want, restarts := w.acks.Load()+6, 0
	err = checkFor(progressTimeout, func() error {
		if n.p.Exited() && restarts < 3 {
			restarts++
			t.Logf("the node exited on the full disk (%v): %s; restarting it", n.p.Err, why(n.p.Stderr()))
			if err := n.start(); err != nil {
				return fmt.Errorf("restart after freeing the space: %w", err)
			}
		}
		if got := w.acks.Load(); got < want {
			return fmt.Errorf("%d of %d acknowledged writes", got, want)
		}
		return nil
	})
	if err != nil {
		state := "still running"
		if n.p.Exited() {
			state = "exited: " + why(n.p.Stderr())
		}
		return fmt.Errorf("no write acknowledged within %v after the space was freed (node %s): %w", progressTimeout, state, err)
	}
	w.stop()
	h.nextPhase()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return regrant(ctx, c, h, "disk-full")
}

// writeUntilRefused writes 60 KiB values from 4 goroutines until the node
// refuses some (or 256 MiB went through), and returns the first refusal
// and how many were acknowledged.
func writeUntilRefused(c *client.Client, h *history) (error, int) {
	const valueSize, writers, limit = 60 << 10, 4, (256 << 20) / (60 << 10)
	var (
		mu       sync.Mutex
		firstErr error
		refused  atomic.Int64
		next     atomic.Int64
		acked    atomic.Int64
		wg       sync.WaitGroup
	)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for refused.Load() < 4 {
				i := next.Add(1)
				if i > limit {
					return
				}
				key := fmt.Sprintf("disk-full/big/%d", i)
				value := make([]byte, valueSize)
				copy(value, key)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				v, err := c.Put(ctx, key, value)
				cancel()
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					refused.Add(1)
					continue
				}
				acked.Add(1)
				h.wrote(hist.Write{Key: key, Value: value, Version: v})
			}
		}()
	}
	wg.Wait()
	return firstErr, int(acked.Load())
}
