package conformance

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
)

// dropProxy is a loopback HTTP/1.1 proxy in front of a node that forwards
// every request, and for the paths it is told, drops the first answer: it
// reads the node's reply in full (the node has acted) and closes the
// client's connection without sending it, as a network that lost the reply
// would. The client must retry with the same request id and get the first
// answer.
type dropProxy struct {
	target string
	drop   []string

	mu      sync.Mutex
	dropped map[string]int
}

func startDropProxy(t *testing.T, target string, drop []string) (*dropProxy, string) {
	p := &dropProxy{target: target, drop: drop, dropped: map[string]int{}}
	s := httptest.NewServer(p)
	t.Cleanup(s.Close)
	return p, s.URL
}

// shouldDrop says whether this answer of path is the first: it is dropped.
func (p *dropProxy) shouldDrop(path string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.drop, path) || p.dropped[path] > 0 {
		return false
	}
	p.dropped[path]++
	return true
}

// droppedAny says whether an answer of one of paths was dropped.
func (p *dropProxy) droppedAny(paths []string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, path := range paths {
		if p.dropped[path] > 0 {
			return true
		}
	}
	return false
}

func (p *dropProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.ContentLength = r.ContentLength
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if p.shouldDrop(r.URL.Path) {
		io.Copy(io.Discard, resp.Body) // the node has answered: it acted
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	// Stream (a watch) as it comes.
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			rc.Flush()
		}
		if err != nil {
			return
		}
	}
}
