package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// Role orders what a bearer token may do (the procedure table's roles).
type Role = api.Role

const (
	RoleWorker   = api.RoleWorker
	RoleOperator = api.RoleOperator
	RoleAdmin    = api.RoleAdmin
)

// Principal is an authenticated caller.
type Principal struct {
	Name string
	Role Role
	// Prefixes bind every role: the resources, keys, queues, groups and
	// elections the token may touch, see and list (scope.go). None, or
	// "" among them: everything (a worker must name them).
	Prefixes []string
}

// TokenEntry is one line of the auth file. Only the token's SHA-256 is
// stored; `leasehold auth token` makes both.
type TokenEntry struct {
	Name     string   `json:"name"`
	SHA256   string   `json:"sha256"`
	Role     string   `json:"role"`
	Prefixes []string `json:"prefixes,omitempty"`
}

// AuthFile is the auth config file's shape: {"tokens": [...]}.
type AuthFile struct {
	Tokens []TokenEntry `json:"tokens"`
}

// Authenticator maps bearer tokens to principals.
type Authenticator struct {
	byHash map[[32]byte]Principal
}

// LoadAuthFile reads and checks an auth file.
func LoadAuthFile(path string) (*Authenticator, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	var f AuthFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("auth file %s: %w", path, err)
	}
	return NewAuthenticator(f)
}

// NewAuthenticator checks f and builds an Authenticator.
func NewAuthenticator(f AuthFile) (*Authenticator, error) {
	a := &Authenticator{byHash: map[[32]byte]Principal{}}
	names := map[string]bool{}
	for i, t := range f.Tokens {
		role, ok := api.RoleNames[t.Role]
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("auth file: token %d has no name", i+1)
		case names[t.Name]:
			return nil, fmt.Errorf("auth file: token name %q appears twice", t.Name)
		case !ok:
			return nil, fmt.Errorf("auth file: token %q has role %q; use worker, operator or admin", t.Name, t.Role)
		case role == RoleWorker && len(t.Prefixes) == 0:
			return nil, fmt.Errorf("auth file: worker token %q needs prefixes (use [\"\"] for every resource)", t.Name)
		}
		if err := checkPrefixes(t); err != nil {
			return nil, err
		}
		raw, err := hex.DecodeString(t.SHA256)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("auth file: token %q: sha256 must be 64 hex characters", t.Name)
		}
		var h [32]byte
		copy(h[:], raw)
		if _, dup := a.byHash[h]; dup {
			return nil, fmt.Errorf("auth file: token %q has the same hash as another", t.Name)
		}
		names[t.Name] = true
		a.byHash[h] = Principal{Name: t.Name, Role: role, Prefixes: t.Prefixes}
	}
	if len(a.byHash) == 0 {
		return nil, fmt.Errorf("auth file: no tokens")
	}
	return a, nil
}

// HashToken is the hash an auth file stores for token.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// Lookup is the principal a bearer token (without "Bearer ") names, for
// fronts outside Connect such as the dashboard. A nil Authenticator (no
// auth) answers as the API does: an anonymous admin.
func (a *Authenticator) Lookup(token string) (Principal, error) {
	if a == nil {
		return anonymous, nil
	}
	return a.authenticate("Bearer " + token)
}

func (a *Authenticator) authenticate(header string) (Principal, error) {
	// The scheme is case-insensitive and may be followed by more than one
	// space (RFC 9110, section 11.1): "bearer TOKEN" is as good.
	scheme, token, _ := strings.Cut(header, " ")
	token = strings.TrimLeft(token, " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Principal{}, leasehold.Errorf(leasehold.CodeUnauthenticated,
			"missing bearer token: send 'Authorization: Bearer TOKEN'")
	}
	p, ok := a.byHash[sha256.Sum256([]byte(token))]
	if !ok {
		return Principal{}, leasehold.Errorf(leasehold.CodeUnauthenticated, "unknown bearer token")
	}
	return p, nil
}

type principalKey struct{}

// Identity names the authenticated caller of ctx's request ("anonymous"
// when the node runs without auth).
func Identity(ctx context.Context) string { return principalOf(ctx).Name }

var anonymous = Principal{Name: "anonymous", Role: RoleAdmin}

// guard is the interceptor that authenticates and authorizes every
// request by the procedure table (scope.go), and names the client its
// acquisitions are charged to.
type guard struct {
	auth *Authenticator  // nil: no auth (loopback or --insecure)
	base context.Context // canceled when the server shuts down
}

// principal is who the Authorization header hdr names.
func (g *guard) principal(hdr http.Header) (Principal, error) {
	if g.auth == nil {
		return anonymous, nil
	}
	return g.auth.authenticate(hdr.Get("Authorization"))
}

// withCaller is ctx for a request of p with headers hdr from peer: its
// principal, and the key its acquisitions are charged to (the token's
// name, or without auth the caller's address, which a forwarding node
// passes on: see trust.go).
func (g *guard) withCaller(ctx context.Context, p Principal, hdr http.Header, peer string) context.Context {
	key := p.Name
	if g.auth == nil {
		key = callerAddr(hdr, peer)
	}
	// The service reads its caller from the context: the name that
	// scopes request IDs ("" without auth) and the actor it audits.
	c := service.Caller{Name: p.Name, Actor: p.Name}
	if p.Name == anonymous.Name {
		c.Name = ""
	}
	ctx = service.WithCaller(ctx, c)
	return context.WithValue(context.WithValue(ctx, principalKey{}, p), rateKey{}, key)
}

func (g *guard) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		p, err := g.principal(req.Header())
		if err != nil {
			return nil, err
		}
		if err := p.authorize(req.Spec().Procedure, req.Any()); err != nil {
			return nil, err
		}
		res, err := next(g.withCaller(ctx, p, req.Header(), req.Peer().Addr), req)
		// Handlers return plain errors (forwardAndMap maps them): a
		// context's, or a Connect error from a forwarded call.
		if err != nil && g.base.Err() != nil &&
			(errors.Is(err, context.Canceled) || connect.CodeOf(err) == connect.CodeCanceled) {
			// Cut off by this node's shutdown, not by the caller: tell the
			// caller to retry (with the same request ID) elsewhere.
			err = leasehold.Errorf(leasehold.CodeUnavailable, "this node is shutting down; retry on another node")
		}
		return res, err
	}
}

func (g *guard) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler authenticates and authorizes the streaming calls:
// the role at once, and the names of a server stream's request when it
// arrives (a session stream's ops are checked one by one, each as its
// call).
func (g *guard) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		p, err := g.principal(conn.RequestHeader())
		if err != nil {
			return api.ToConnect(err)
		}
		proc := conn.Spec().Procedure
		row := api.Lookup(proc)
		if row == nil || !row.Streams() || conn.Spec().StreamType == connect.StreamTypeClient {
			return api.ToConnect(leasehold.Errorf(leasehold.CodeInvalid, "%s is not a streaming call served here", proc))
		}
		if err := p.mayCall(row); err != nil {
			return api.ToConnect(err)
		}
		if row.Scope.Kind != api.ScopePerOp {
			conn = &checkedConn{StreamingHandlerConn: conn, check: func(msg any) error { return p.authorize(proc, msg) }}
		}
		return next(g.withCaller(ctx, p, conn.RequestHeader(), conn.Peer().Addr), conn)
	}
}

// checkedConn authorizes a server stream's request as it is read.
type checkedConn struct {
	connect.StreamingHandlerConn
	check func(msg any) error
	read  bool
}

func (c *checkedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if c.read {
		return nil // a second request, which connect refuses
	}
	c.read = true
	if err := c.check(msg); err != nil {
		return api.ToConnect(err)
	}
	return nil
}
