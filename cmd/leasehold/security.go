package main

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
	"github.com/leasehold/leasehold/server"
)

// certPool reads PEM certificates from path.
func certPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// apiTLS is the API's server TLS config: a certificate, and with clientCA
// set, required client certificates (mTLS).
func apiTLS(cert, key, clientCA string) (*tls.Config, error) {
	if cert == "" && key == "" {
		if clientCA != "" {
			return nil, usagef("--tls-client-ca needs --tls-cert and --tls-key")
		}
		return nil, nil
	}
	kp, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		if cfg.ClientCAs, err = certPool(clientCA); err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// raftTLS is the node-to-node mutual TLS config: this node's certificate
// serves and dials; the CA verifies the other side both ways, and a
// dialed node's certificate must name serverName, or else the host dialed.
func raftTLS(cert, key, ca, serverName string) (*tls.Config, error) {
	if cert == "" && key == "" && ca == "" {
		if serverName != "" {
			return nil, usagef("--raft-tls-server-name needs --raft-tls-cert, --raft-tls-key and --raft-tls-ca")
		}
		return nil, nil
	}
	if cert == "" || key == "" || ca == "" {
		return nil, usagef("raft TLS needs all of --raft-tls-cert, --raft-tls-key and --raft-tls-ca")
	}
	kp, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("--raft-tls-cert/--raft-tls-key: %w", err)
	}
	pool, err := certPool(ca)
	if err != nil {
		return nil, fmt.Errorf("--raft-tls-ca: %w", err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{kp},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
		ServerName:   serverName,
	}, nil
}

// clientTLS is the CLI's TLS config for https endpoints.
func clientTLS(ca, cert, key string) (*tls.Config, error) {
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pool, err := certPool(ca)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		cfg.RootCAs = pool
	}
	if cert != "" || key != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("--cert-file/--key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg, nil
}

// loopback reports whether addr (host:port) only listens on loopback.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// metricsAuthFor decides whether /metrics needs a token: as --metrics-auth
// says if it was given (set says so), else whenever auth is on, loopback
// included (its series name every tenant's queues). Off loopback without
// auth, /metrics is served only with --insecure, like the API.
func metricsAuthFor(f *serveFlags, set, auth bool) (bool, error) {
	addr, flag := f.apiAddr, "--api-addr"
	if f.metricsAddr != "" {
		addr, flag = f.metricsAddr, "--metrics-addr"
	}
	switch {
	case set && f.metricsAuth && !auth:
		return false, usagef("--metrics-auth needs --auth-file: its tokens are what /metrics would ask for")
	case set:
		return f.metricsAuth, nil
	case !auth && !loopback(addr) && !f.insecure:
		return false, usagef("%s %s is not a loopback address: give --auth-file (/metrics then needs an operator token) or --insecure", flag, addr)
	}
	return auth, nil
}

// checkAllowHosts refuses an --allow-host value that is not a bare host
// name, as it would never match a request's Host.
func checkAllowHosts(names []string) error {
	for _, name := range names {
		if name == "" || strings.ContainsAny(name, "/:@ ") {
			return usagef("--allow-host %q: give a host name as clients write it in the node's URL, without scheme, port or path "+
				"(--allow-host leasehold.internal)", name)
		}
	}
	return nil
}

func newAuth() *cobra.Command {
	cmd := &cobra.Command{Use: "auth", Short: "Make bearer tokens for the auth file"}
	var role string
	var prefixes []string
	var o *output
	token := &cobra.Command{
		Use:   "token NAME",
		Short: "Make a random token; print it once, and the auth-file entry that stores only its hash",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b := make([]byte, 32)
			rand.Read(b)
			tok := hex.EncodeToString(b)
			entry := server.TokenEntry{Name: args[0], SHA256: server.HashToken(tok), Role: role, Prefixes: prefixes}
			if _, err := server.NewAuthenticator(server.AuthFile{Tokens: []server.TokenEntry{entry}}); err != nil {
				return usageError{err} // a bad role or prefix
			}
			line, _ := json.Marshal(entry)
			return o.print(cmd.OutOrStdout(), cliout.AuthToken{Name: args[0], BearerToken: tok, Entry: line}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "token (give it to %s; it is not stored): %s\nauth-file entry:\n%s\n", args[0], tok, line)
				return err
			})
		},
	}
	o = addOutput(token)
	token.Flags().StringVar(&role, "role", "worker", "worker, operator or admin")
	token.Flags().StringSliceVar(&prefixes, "prefix", nil,
		"the token sees and touches only names (resources, keys, queues, groups, elections) under these prefixes (repeatable; a worker needs one, \"\" for all; an operator or admin with one may not change membership or take snapshots)")
	cmd.AddCommand(token)
	return cmd
}

// reservedFiles are the open files a node keeps for itself beyond API
// connections: raft peers and forwarding, its log and snapshots, /metrics.
const reservedFiles = 256

// connsWithin fits the default --max-conns under the open-file limit
// nofile, so that a node full of connections can still open its log and
// answer /healthz; a value the operator set is kept. It returns the limit
// to use and whether it is above what nofile allows.
func connsWithin(maxConns int, set bool, nofile uint64) (int, bool) {
	room := int(min(nofile, 1<<30)) - reservedFiles
	if maxConns <= 0 || maxConns <= room {
		return maxConns, false
	}
	if set {
		return maxConns, true
	}
	return max(room, 1), false
}
