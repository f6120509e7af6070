package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"connectrpc.com/connect"
)

// hostCheck refuses a request whose Host does not name this node. A
// browser always sends the name of the page it runs in as Host, so a page
// on another name that DNS rebinding pointed at this node's address is
// refused, even though it reaches the node (on loopback, say) and its
// requests count as same-origin in the browser.
//
// A Host passes if it is
//   - an IP address, with or without port: a browser sends one only to
//     that address, so no DNS answer can rebind it (this covers the
//     node's own listen and raft addresses, which forwarding nodes and
//     probes use);
//   - localhost;
//   - the host of the node's advertised API URL, or a name allowed by
//     Config.AllowHosts;
//   - absent (HTTP/1.0): no browser sends a request without one.
//
// /healthz and /readyz pass whatever their Host (see unchecked).
type hostCheck struct {
	names  map[string]bool // normalized (see hostName)
	errors *connect.ErrorWriter
}

// unchecked are the paths served whatever the Host: probes that a load
// balancer may send with a name of its own, which change nothing and
// tell only whether the node serves and who leads.
var unchecked = map[string]bool{"/healthz": true, "/readyz": true}

func newHostCheck(advertiseURL string, allow []string, errors *connect.ErrorWriter) *hostCheck {
	h := &hostCheck{names: map[string]bool{"localhost": true}, errors: errors}
	if u, err := url.Parse(advertiseURL); err == nil && u.Host != "" {
		h.names[hostName(u.Host)] = true
	}
	for _, name := range allow {
		h.names[hostName(name)] = true
	}
	return h
}

// hostName is the name in a Host value: without port or IPv6 brackets, in
// lower case, without a trailing dot ("LocalHost.:7420" is "localhost").
func hostName(host string) string {
	if _, err := netip.ParseAddr(host); err != nil { // else an IPv6 address without brackets
		host = (&url.URL{Host: host}).Hostname()
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// allows reports whether host (a request's Host) names this node.
func (h *hostCheck) allows(host string) bool {
	if host == "" {
		return true
	}
	name := hostName(host)
	_, err := netip.ParseAddr(name)
	return err == nil || h.names[name]
}

// wrap serves next only the requests whose Host names this node; the
// others get 421 Misdirected Request, saying which flag allows the name.
func (h *hostCheck) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unchecked[r.URL.Path] || h.allows(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		name := hostName(r.Host)
		msg := fmt.Sprintf("this node does not answer to the name %q (the request's Host): a web page on another name "+
			"may be one that DNS rebinding pointed here; if clients reach the node by that name, start it with "+
			"--allow-host %s (LEASEHOLD_ALLOW_HOST)", name, name)
		if r.Method != http.MethodPost || !h.errors.IsSupported(r) { // a page, /metrics
			http.Error(w, msg+"\n", http.StatusMisdirectedRequest)
			return
		}
		// An API call gets the error its protocol reads, message and all.
		h.errors.Write(misdirected{w}, r, connect.NewError(connect.CodePermissionDenied, errors.New(msg)))
	})
}

// misdirected answers 421 where the error writer would answer another
// status than 200: a Connect unary error carries its code in its body,
// while streams and gRPC answer 200 and carry the error in the stream.
type misdirected struct{ http.ResponseWriter }

func (m misdirected) WriteHeader(status int) {
	if status != http.StatusOK {
		status = http.StatusMisdirectedRequest
	}
	m.ResponseWriter.WriteHeader(status)
}
