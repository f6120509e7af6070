//go:build unix

package main

import "syscall"

// openFileLimit is this process's limit of open files. The Go runtime has
// already raised the soft limit to the hard one at start.
func openFileLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return r.Cur, true
}
