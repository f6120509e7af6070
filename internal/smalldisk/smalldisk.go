// Package smalldisk gives tests a size-limited file system (a tmpfs they
// mount themselves) and a ballast file that fills it, to run real nodes
// out of disk space.
package smalldisk

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size bytes on a new directory and unmounts it
// when the test ends. It skips the test when not root (mount needs it).
func Mount(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a size-limited tmpfs")
	}
	dir := t.TempDir()
	opts := "size=" + strconv.FormatInt(size, 10) + ",mode=0700"
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Fatalf("mount tmpfs (%s) on %s: %v", opts, dir, err)
	}
	t.Cleanup(func() {
		// Lazily, so a file a failed test left open does not keep it.
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes a ballast file in dir until the file system refuses more
// (ENOSPC), then gives back leave bytes, and returns a function that
// deletes the ballast again.
func Fill(t testing.TB, dir string, leave int64) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for len(chunk) > 0 {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			chunk = chunk[:len(chunk)/2] // the last pages, down to a byte
		}
	}
	if leave > 0 {
		size, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(max(0, size-leave)); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("free %s: %v", path, err)
		}
	}
}

// Free reports the bytes available in dir's file system.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}
