package netfault

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/leasehold/leasehold/internal/freeport"
)

// Lab is a set of hosts whose every directed link passes through a proxy
// that Net controls: each host listens on its own addresses for a few
// named services, and reaches every other host's services through the
// proxies of the link between them.
type Lab struct {
	Net   *Net
	Hosts []*Host
	// Mode is "netns" (each host in a network namespace of its own, with
	// an address of its own) or "loopback" (every host on 127.0.0.1,
	// links told apart by port).
	Mode string
	// Fallback says why NewLab made a loopback lab rather than a netns
	// one (nil for a netns lab, or one asked for as loopback).
	Fallback error
	services []string
	proxies  []*Proxy
	teardown func() error // the namespaces, if any
}

// Host is one host of a Lab.
type Host struct {
	Name   string
	ns     string                       // network namespace, "" on loopback
	listen map[string]string            // service -> address its processes listen on
	reach  map[string]map[string]string // host -> service -> address this host dials
	dial   Dialer
}

// Listen is the address (host:port) a process of this host listens on for
// service.
func (h *Host) Listen(service string) string { return h.listen[service] }

// Reach is the address this host dials to reach service on host to: its
// own address for itself, else one that passes through the link's proxy.
func (h *Host) Reach(to *Host, service string) string { return h.reach[to.Name][service] }

// Command is name and args wrapped to run on this host (in its network
// namespace), as exec.Command takes them.
func (h *Host) Command(name string, args ...string) (string, []string) {
	if h.ns == "" {
		return name, args
	}
	return "ip", append([]string{"netns", "exec", h.ns, name}, args...)
}

// DialContext opens a connection from this host (from inside its network
// namespace), for a client that runs in the test's own process.
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return h.dial(ctx, network, addr)
}

// ListenTCP listens on addr on this host (inside its network namespace),
// for a server that runs in the test's own process.
func (h *Host) ListenTCP(addr string) (net.Listener, error) {
	if h.ns == "" {
		return net.Listen("tcp", addr)
	}
	var ln net.Listener
	err := inNetns(h.ns, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// NewLab makes a lab of hosts n1...nN, each listening for services: in
// network namespaces where the machine allows it, else on loopback with
// Fallback saying why.
func NewLab(hosts int, services []string, seed uint64) (*Lab, error) {
	lab, err := NewNetnsLab(hosts, services, seed)
	if err == nil {
		return lab, nil
	}
	lab, lerr := NewLoopbackLab(hosts, services, seed)
	if lerr != nil {
		return nil, errors.Join(err, lerr)
	}
	lab.Fallback = err
	return lab, nil
}

// NewLoopbackLab makes a lab on 127.0.0.1: each host listens on ports of
// its own and reaches every other host through a proxy port per link and
// service. A process there can still dial another host's own address
// directly: nothing but the addresses it is given keeps it on its links.
func NewLoopbackLab(hosts int, services []string, seed uint64) (*Lab, error) {
	lab := &Lab{Net: NewNet(), Mode: "loopback", services: services}
	var d net.Dialer
	for i := range hosts {
		h := newHost(fmt.Sprintf("n%d", i+1), "", d.DialContext)
		for _, s := range services {
			addr, err := freeport.Addr()
			if err != nil {
				return nil, err
			}
			h.listen[s] = addr
		}
		lab.Hosts = append(lab.Hosts, h)
	}
	err := lab.link(services, seed, func(from, to *Host, s string) (net.Listener, string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		return ln, ln.Addr().String(), err
	})
	if err != nil {
		lab.Close()
		return nil, err
	}
	return lab, nil
}

func newHost(name, ns string, dial Dialer) *Host {
	return &Host{Name: name, ns: ns, listen: map[string]string{}, reach: map[string]map[string]string{}, dial: dial}
}

// link puts a proxy on every directed link for every service: listen
// gives its listener and the address its host dials it by.
func (lab *Lab) link(services []string, seed uint64, listen func(from, to *Host, service string) (net.Listener, string, error)) error {
	for _, from := range lab.Hosts {
		for _, to := range lab.Hosts {
			from.reach[to.Name] = map[string]string{}
			for _, s := range services {
				if from == to {
					from.reach[to.Name][s] = from.listen[s]
					continue
				}
				ln, addr, err := listen(from, to, s)
				if err != nil {
					return fmt.Errorf("netfault: proxy %s -> %s for %s: %w", from.Name, to.Name, s, err)
				}
				seed++
				p := NewProxy(ln, to.listen[s], nil, seed)
				lab.proxies = append(lab.proxies, p)
				lab.Net.Add(from.Name, to.Name, p)
				from.reach[to.Name][s] = addr
			}
		}
	}
	return nil
}

// Close stops every proxy and removes what the lab made. Stop the
// processes running on its hosts first.
func (lab *Lab) Close() error {
	var errs []error
	for _, p := range lab.proxies {
		errs = append(errs, p.Close())
	}
	if lab.teardown != nil {
		errs = append(errs, lab.teardown())
	}
	return errors.Join(errs...)
}

// String describes the lab for a test's log.
func (lab *Lab) String() string {
	s := lab.Mode + ":"
	for _, h := range lab.Hosts {
		s += " " + h.Name
		for _, svc := range lab.services {
			s += " " + svc + "=" + h.listen[svc]
		}
		s += ";"
	}
	return s
}
