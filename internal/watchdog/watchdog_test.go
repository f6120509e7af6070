package watchdog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A deadline that sat unread in the pipe comes out where it went in (within
// the conversions' own cost), never later: the pipe's delay cannot extend it.
func TestDeadlineThroughAPipeIsNeverLater(t *testing.T) {
	deadline := time.Now().Add(3 * time.Second)
	var pipe bytes.Buffer
	if err := writeDeadline(&pipe, toMono(deadline)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // unread, as in a stopped reader's pipe
	mono, err := readDeadline(&pipe)
	if err != nil {
		t.Fatal(err)
	}
	got := fromMono(mono)
	if got.After(deadline) {
		t.Errorf("deadline came out %v later than it went in", got.Sub(deadline))
	}
	if early := deadline.Sub(got); early > 10*time.Millisecond {
		t.Errorf("deadline came out %v early; want only the conversions' cost", early)
	}
}

func TestCgroup2Mount(t *testing.T) {
	for _, tc := range []struct {
		name, mountinfo, mount, root string
	}{
		{"unified", "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup", "/"},
		{"hybrid", "25 24 0:22 / /sys/fs/cgroup ro - tmpfs tmpfs ro\n" +
			"26 25 0:23 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n" +
			"27 25 0:24 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/unified", "/"},
		{"escaped, optional fields, container root", "40 30 0:26 /kubepods/pod1 /sys/fs/my\\040cgroup rw shared:9 master:2 - cgroup2 none rw\n",
			"/sys/fs/my cgroup", "/kubepods/pod1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mountinfo")
			os.WriteFile(path, []byte(tc.mountinfo), 0o644)
			mount, root, err := cgroup2Mount(path)
			if err != nil || mount != tc.mount || root != tc.root {
				t.Errorf("cgroup2Mount = %q, %q, %v; want %q, %q", mount, root, err, tc.mount, tc.root)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(path, []byte("26 25 0:23 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"), 0o644)
	if _, _, err := cgroup2Mount(path); err == nil {
		t.Error("cgroup2Mount found a cgroup2 mount in a cgroup v1-only mountinfo")
	}
}

func TestOwnCgroup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cgroup")
	os.WriteFile(path, []byte("4:memory:/x\n1:cpu:/\n0::/system.slice/app.service\n"), 0o644)
	if got, err := ownCgroup(path); err != nil || got != "/system.slice/app.service" {
		t.Errorf("ownCgroup = %q, %v; want /system.slice/app.service", got, err)
	}
	os.WriteFile(path, []byte("4:memory:/x\n"), 0o644)
	if _, err := ownCgroup(path); err == nil {
		t.Error("ownCgroup found a cgroup v2 path in a v1-only /proc/self/cgroup")
	}
}
