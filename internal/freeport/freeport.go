// Package freeport picks loopback ports for the servers that tests and the
// embedded benchmark start.
package freeport

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is where picking starts: above the well-known and commonly
// configured service ports.
const lowest = 10000

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Addr returns "127.0.0.1:PORT" for a port that was free a moment ago.
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// Port returns a loopback port that was free a moment ago. It picks below
// the kernel's ephemeral range, where outgoing connections take their source
// ports, so no connection can take it before the server listens (a port
// the kernel handed out for ":0" can be taken that way), and it never
// returns the same port twice in one process.
func Port() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	top := ephemeralStart()
	for range 1000 {
		p := lowest + rand.IntN(top-lowest)
		if handed[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // in use
		}
		l.Close()
		handed[p] = true
		return p, nil
	}
	return 0, errors.New("freeport: no free loopback port below the ephemeral range after 1000 tries")
}

// ephemeralStart is the first port of the range the kernel takes source
// ports from (32768 on Linux by default; BSDs and Windows start higher).
func ephemeralStart() int {
	const fallback = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return fallback
	}
	p, err := strconv.Atoi(f[0])
	if err != nil || p <= lowest+1000 {
		return fallback
	}
	return p
}
