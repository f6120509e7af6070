package procs

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// probe asks /readyz without keeping connections to a node that may die.
var probe = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// WaitReady polls url's /readyz until it answers 200. The error says why
// not: p exited first (with the line of its stderr that says why), or it
// was still not ready after timeout.
func WaitReady(p *Proc, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if p.Exited() {
			return fmt.Errorf("%s exited before it was ready (%v): %s", p.Name, p.Err, Why(p.Stderr()))
		}
		err := readyz(url)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v: %w", p.Name, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readyz(url string) error {
	resp, err := probe.Get(url + "/readyz")
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s: %s", resp.Status, b)
	}
	return nil
}

// Why picks from a dead process's stderr the line that says why: a panic,
// or else its last lines.
func Why(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			return l
		}
	}
	return LastLines(stderr, 3)
}

// LastLines is the end of a log, enough to name an error.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
