package watchdog

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// newCgroup creates an empty cgroup v2 for the command's tree under the
// calling process's own cgroup. It fails when cgroup v2 is not mounted, the
// kernel has no cgroup.kill (before 5.14) or the cgroup is not writable
// (not root, not delegated): then the caller falls back to the process group.
func newCgroup() (string, error) {
	mount, root, err := cgroup2Mount("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	own, err := ownCgroup("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	rel, ok := strings.CutPrefix(own, root)
	if !ok {
		return "", fmt.Errorf("own cgroup %s is outside the cgroup2 mount's root %s", own, root)
	}
	var b [4]byte
	rand.Read(b[:])
	dir := filepath.Join(mount, rel, fmt.Sprintf("leasehold-run-%d-%s", os.Getpid(), hex.EncodeToString(b[:])))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		os.Remove(dir)
		return "", errors.New("the kernel has no cgroup.kill (Linux 5.14 or later)")
	}
	return dir, nil
}

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup,
// or /sys/fs/cgroup/unified on a hybrid system) and which of its cgroups is
// the mount's root.
func cgroup2Mount(mountinfo string) (mount, root string, err error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		f := strings.Fields(s.Text())
		for i, v := range f {
			if v == "-" && i+1 < len(f) && f[i+1] == "cgroup2" && len(f) > 4 {
				return unescapeMount(f[4]), f[3], nil
			}
		}
	}
	if err := s.Err(); err != nil {
		return "", "", err
	}
	return "", "", errors.New("no cgroup v2 hierarchy is mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroup is the calling process's cgroup v2 path (the "0::" line).
func ownCgroup(procCgroup string) (string, error) {
	b, err := os.ReadFile(procCgroup)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("this process is in no cgroup v2")
}
