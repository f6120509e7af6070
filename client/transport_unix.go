//go:build unix

package client

import (
	"errors"
	"net"
	"syscall"
)

// alive reports whether an idle connection is still open on the node's
// side: nothing may be waiting to be read on it, neither data nor the end
// of the stream. It peeks without blocking.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = errors.Is(err, syscall.EAGAIN) // nothing to read: still open
		return true                         // never wait for readiness
	})
	return err == nil && ok
}
