package main

import (
	"strings"
	"testing"
)

// /metrics asks for a token by default exactly when it is served off
// loopback with auth on; an explicit --metrics-auth wins.
func TestMetricsAuthFor(t *testing.T) {
	for _, tc := range []struct {
		name      string
		f         serveFlags
		set, auth bool
		want      bool
		err       string
	}{
		{name: "loopback, no auth", f: serveFlags{apiAddr: "127.0.0.1:7420"}},
		{name: "loopback, auth", f: serveFlags{apiAddr: "127.0.0.1:7420"}, auth: true},
		{name: "off loopback, auth", f: serveFlags{apiAddr: "10.0.0.5:7420"}, auth: true, want: true},
		{name: "off loopback, auth, explicitly off", f: serveFlags{apiAddr: "10.0.0.5:7420"}, set: true, auth: true},
		{name: "loopback, auth, explicitly on", f: serveFlags{apiAddr: "127.0.0.1:7420", metricsAuth: true}, set: true, auth: true, want: true},
		{name: "metrics apart on loopback, API off", f: serveFlags{apiAddr: "10.0.0.5:7420", metricsAddr: "127.0.0.1:9090"}, auth: true},
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
