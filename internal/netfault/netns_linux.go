package netfault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// A netns lab, slot S (one of 255, so that labs of several test runs at
// once never share a name or an address):
//
//   - host i runs in network namespace lhfShi, on address 10.77.S.i, on
//     the namespace's end of a veth pair (eth0) whose other end, lhfShi
//     in the root namespace, has 10.78.S.i;
//   - in host i's namespace every other host's address is a local address
//     (on lo), where the proxies of i's links listen, so every connection
//     i opens to another host goes through its link's proxy, which the
//     test process runs in the root namespace and which dials the real
//     host over its veth;
//   - the root namespace reaches every host directly: a test's own
//     observer sees every node even while they are cut from each other.
//
// Every host's services listen on the same ports (portBase + their
// index), each on its host's own address.
const (
	portBase = 7420
	maxHosts = 250
)

// NewNetnsLab makes a lab of hosts n1...nN in network namespaces (see
// above). It needs Linux, root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and
// iproute2's ip.
func NewNetnsLab(hosts int, services []string, seed uint64) (*Lab, error) {
	if hosts < 1 || hosts > maxHosts {
		return nil, fmt.Errorf("netfault: %d hosts: 1 to %d", hosts, maxHosts)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("netfault: network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("netfault: network namespaces need iproute2's ip: %w", err)
	}
	slot, unlock, err := claimSlot()
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("lhf%dh", slot)
	removeLeftovers(prefix) // of a run that died holding this slot
	lab := &Lab{Net: NewNet(), Mode: "netns", services: services}
	lab.teardown = func() error {
		err := removeLeftovers(prefix)
		unlock()
		return err
	}
	if err := lab.makeNamespaces(slot, prefix, hosts, services); err != nil {
		lab.Close()
		return nil, err
	}
	err = lab.link(services, seed, func(from, to *Host, s string) (net.Listener, string, error) {
		addr := to.listen[s] // the same address in every namespace: the proxy's, in from's
		var ln net.Listener
		err := inNetns(from.ns, func() (err error) {
			ln, err = net.Listen("tcp", addr)
			return err
		})
		return ln, addr, err
	})
	if err != nil {
		lab.Close()
		return nil, err
	}
	return lab, nil
}

func (lab *Lab) makeNamespaces(slot int, prefix string, hosts int, services []string) error {
	hostIP := func(i int) string { return fmt.Sprintf("10.77.%d.%d", slot, i) }
	rootIP := func(i int) string { return fmt.Sprintf("10.78.%d.%d", slot, i) }
	var root []string
	for i := 1; i <= hosts; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		root = append(root,
			"netns add "+name,
			"link add "+name+" type veth peer name eth0 netns "+name,
			"addr add "+rootIP(i)+"/32 dev "+name,
			"link set "+name+" up",
			"route add "+hostIP(i)+"/32 dev "+name+" src "+rootIP(i))
	}
	if err := ipBatch("", root); err != nil {
		return err
	}
	for i := 1; i <= hosts; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		cmds := []string{
			"link set lo up",
			"addr add " + hostIP(i) + "/32 dev eth0",
			"link set eth0 up",
			"route add " + rootIP(i) + "/32 dev eth0 src " + hostIP(i),
		}
		for j := 1; j <= hosts; j++ {
			if j != i {
				cmds = append(cmds, "addr add "+hostIP(j)+"/32 dev lo")
			}
		}
		if err := ipBatch(name, cmds); err != nil {
			return err
		}
		h := newHost(fmt.Sprintf("n%d", i), name, func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = inNetns(name, func() error {
				var d net.Dialer
				c, err = d.DialContext(ctx, network, addr)
				return err
			})
			return c, err
		})
		for k, s := range services {
			h.listen[s] = fmt.Sprintf("%s:%d", hostIP(i), portBase+k)
		}
		lab.Hosts = append(lab.Hosts, h)
	}
	return nil
}

// ipBatch runs ip commands, in network namespace ns unless "".
func ipBatch(ns string, cmds []string) error {
	args := []string{"-batch", "-"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	cmd := exec.Command("ip", args...)
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netfault: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeLeftovers deletes the namespaces and veths named with prefix.
// Deleting a namespace takes its end of the veth with it, and so the
// pair, once no process runs in it; the root end is deleted too, for a
// namespace a process still holds.
func removeLeftovers(prefix string) error {
	var errs []error
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
				if out, err := exec.Command("ip", "netns", "del", f[0]).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("ip netns del %s: %v: %s", f[0], err, out))
				}
			}
		}
	}
	links, _ := net.Interfaces()
	for _, l := range links {
		if strings.HasPrefix(l.Name, prefix) {
			exec.Command("ip", "link", "del", l.Name).Run() // gone with its namespace, most often
		}
	}
	return errors.Join(errs...)
}

// claimSlot locks one of 255 slots for this process (an flock, released
// when the process dies), so that concurrent labs use their own names and
// addresses.
func claimSlot() (int, func(), error) {
	dir := "/run/lock"
	if _, err := os.Stat(dir); err != nil {
		dir = os.TempDir()
	}
	start := os.Getpid() % 255
	for k := range 255 {
		slot := (start + k) % 255
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("leasehold-netfault-%d.lock", slot)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return 0, nil, fmt.Errorf("netfault: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		return slot, func() { f.Close() }, nil
	}
	return 0, nil, errors.New("netfault: all 255 lab slots are taken")
}

// inNetns runs f on a thread of its own in network namespace ns: sockets
// f makes belong to ns for their whole life. The thread is never given
// back to the runtime (the goroutine ends locked to it, so the runtime
// ends it), so no other goroutine ever runs in ns.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(filepath.Join("/run/netns", ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("netfault: open namespace %s: %w", ns, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netfault: enter namespace %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}
