package main

import (
	"strings"
	"testing"
)

// /metrics asks for a token by default exactly when auth is on, on
// loopback too (its series name every tenant's queues); an explicit
// --metrics-auth wins.
func TestMetricsAuthFor(t *testing.T) {
	for _, tc := range []struct {
		name      string
		f         serveFlags
		set, auth bool
		want      bool
		err       string
	}{
		{name: "loopback, no auth", f: serveFlags{apiAddr: "127.0.0.1:7420"}},
		{name: "loopback, auth", f: serveFlags{apiAddr: "127.0.0.1:7420"}, auth: true, want: true},
		{name: "loopback, auth, explicitly off", f: serveFlags{apiAddr: "127.0.0.1:7420"}, set: true, auth: true},
		{name: "off loopback, auth", f: serveFlags{apiAddr: "10.0.0.5:7420"}, auth: true, want: true},
		{name: "off loopback, auth, explicitly off", f: serveFlags{apiAddr: "10.0.0.5:7420"}, set: true, auth: true},
		{name: "loopback, auth, explicitly on", f: serveFlags{apiAddr: "127.0.0.1:7420", metricsAuth: true}, set: true, auth: true, want: true},
		{name: "metrics apart on loopback, API off", f: serveFlags{apiAddr: "10.0.0.5:7420", metricsAddr: "127.0.0.1:9090"}, auth: true, want: true},
		{name: "metrics apart off loopback", f: serveFlags{apiAddr: "127.0.0.1:7420", metricsAddr: "[::]:9090"}, auth: true, want: true},
		{name: "on without auth", f: serveFlags{apiAddr: "127.0.0.1:7420", metricsAuth: true}, set: true, err: "needs --auth-file"},
		{name: "metrics off loopback without auth", f: serveFlags{apiAddr: "127.0.0.1:7420", metricsAddr: "0.0.0.0:9090"}, err: "--metrics-addr 0.0.0.0:9090 is not a loopback address"},
		{name: "metrics off loopback, insecure", f: serveFlags{apiAddr: "127.0.0.1:7420", metricsAddr: "0.0.0.0:9090", insecure: true}},
	} {
		got, err := metricsAuthFor(&tc.f, tc.set, tc.auth)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case got != tc.want:
			t.Errorf("%s: metrics auth %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The default --max-conns is lowered to fit the open-file limit; a value
// the operator chose is kept, with a warning.
func TestConnsWithin(t *testing.T) {
	for _, tc := range []struct {
		name     string
		conns    int
		set      bool
		nofile   uint64
		want     int
		wantWarn bool
	}{
		{"default fits", 4096, false, 1 << 20, 4096, false},
		{"default lowered", 4096, false, 1024, 1024 - reservedFiles, false},
		{"set kept, warned", 4096, true, 1024, 4096, true},
		{"no limit", -1, false, 1024, -1, false},
		{"tiny nofile", 4096, false, 100, 1, false},
	} {
		got, warn := connsWithin(tc.conns, tc.set, tc.nofile)
		if got != tc.want || warn != tc.wantWarn {
			t.Errorf("%s: %d, warn %v; want %d, warn %v", tc.name, got, warn, tc.want, tc.wantWarn)
		}
	}
}

// --allow-host takes host names only: a URL or host:port never matches a
// request's Host, so it is refused naming the value.
func TestCheckAllowHosts(t *testing.T) {
	if err := checkAllowHosts([]string{"leasehold.internal", "n1"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "http://leasehold.internal", "leasehold.internal:7420", "leasehold.internal/ui", "a b"} {
		if err := checkAllowHosts([]string{"ok.example", bad}); err == nil || !strings.Contains(err.Error(), `--allow-host "`+bad+`"`) {
			t.Errorf("--allow-host %q: %v, want a usage error naming it", bad, err)
		}
	}
}
