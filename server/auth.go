package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// Role orders what a bearer token may do; each role can do all that the
// ones below it can.
type Role int

const (
	RoleWorker   Role = iota + 1 // acquire, renew, release, fenced KV, within its prefixes
	RoleOperator                 // plus inspection, audit and cluster status
	RoleAdmin                    // plus forced release and membership changes
)

var roleNames = map[string]Role{"worker": RoleWorker, "operator": RoleOperator, "admin": RoleAdmin}

func (r Role) String() string {
	for n, v := range roleNames {
		if v == r {
			return n
		}
	}
	return "none"
}

// Principal is an authenticated caller.
type Principal struct {
	Name     string
	Role     Role
	Prefixes []string // for workers: the resources and keys they may touch
}

// mayTouch refuses, naming the first, any of names outside a worker's
// prefixes.
func (p Principal) mayTouch(names []string) error {
	for _, n := range names {
		if !p.allows(n) {
			return leasehold.Errorf(leasehold.CodePermission,
				"token %q may not touch %q: it is outside the token's prefixes %q", p.Name, n, p.Prefixes)
		}
	}
	return nil
}

// allows reports whether p may touch a resource or key named s.
func (p Principal) allows(s string) bool {
	if p.Role >= RoleOperator {
		return true
	}
	for _, pre := range p.Prefixes {
		if strings.HasPrefix(s, pre) {
			return true
		}
	}
	return false
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
		role, ok := roleNames[t.Role]
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

// required is the least role each procedure needs. A procedure missing
// here needs admin, so a new one is closed until someone opens it.
var required = map[string]Role{
	"/leasehold.v1.Leases/Acquire":         RoleWorker,
	"/leasehold.v1.Leases/Renew":           RoleWorker,
	"/leasehold.v1.Leases/Release":         RoleWorker,
	"/leasehold.v1.Leases/Batch":           RoleWorker,
	"/leasehold.v1.Leases/Get":             RoleOperator,
	"/leasehold.v1.Leases/List":            RoleOperator,
	"/leasehold.v1.KV/Put":                 RoleWorker,
	"/leasehold.v1.KV/Get":                 RoleWorker,
	"/leasehold.v1.KV/Delete":              RoleWorker,
	"/leasehold.v1.KV/CheckFence":          RoleWorker,
	"/leasehold.v1.KV/Txn":                 RoleWorker,
	"/leasehold.v1.KV/List":                RoleWorker,
	"/leasehold.v1.Elections/Campaign":     RoleWorker,
	"/leasehold.v1.Elections/Proclaim":     RoleWorker,
	"/leasehold.v1.Elections/Resign":       RoleWorker,
	"/leasehold.v1.Elections/Leader":       RoleWorker,
	"/leasehold.v1.Elections/Observe":      RoleWorker,
	"/leasehold.v1.Elections/List":         RoleOperator,
	"/leasehold.v1.Watch/Watch":            RoleWorker, // within its prefixes: the handler checks them
	"/leasehold.v1.Admin/Locks":            RoleOperator,
	"/leasehold.v1.Idempotency/Begin":      RoleWorker,
	"/leasehold.v1.Idempotency/Complete":   RoleWorker,
	"/leasehold.v1.Idempotency/Abandon":    RoleWorker,
	"/leasehold.v1.Idempotency/Get":        RoleWorker,
	"/leasehold.v1.Idempotency/List":       RoleWorker,
	"/leasehold.v1.Groups/Create":          RoleOperator,
	"/leasehold.v1.Groups/Grow":            RoleOperator,
	"/leasehold.v1.Groups/Delete":          RoleAdmin,
	"/leasehold.v1.Groups/List":            RoleOperator,
	"/leasehold.v1.Groups/Get":             RoleWorker,
	"/leasehold.v1.Groups/Join":            RoleWorker,
	"/leasehold.v1.Groups/Leave":           RoleWorker, // proven by the session's secret, as Renew
	"/leasehold.v1.Groups/AckRevocation":   RoleWorker,
	"/leasehold.v1.Groups/Assignments":     RoleWorker, // within its prefixes: the handler checks them
	"/leasehold.v1.Admin/Audit":            RoleOperator,
	"/leasehold.v1.Admin/ForceRelease":     RoleAdmin,
	"/leasehold.v1.Admin/Snapshot":         RoleAdmin,
	"/leasehold.v1.Sessions/Session":       RoleWorker, // each op as its unary call: the handler checks prefixes
	"/leasehold.v1.Cluster/Members":        RoleOperator,
	"/leasehold.v1.Cluster/Status":         RoleOperator,
	"/leasehold.v1.Cluster/AddVoter":       RoleAdmin,
	"/leasehold.v1.Cluster/RemoveServer":   RoleAdmin,
	"/leasehold.v1.Cluster/TransferLeader": RoleAdmin,
	// Queues: workers send, receive and settle deliveries within their
	// prefixes (of queue names); operators inspect; admins create, purge,
	// delete and redrive.
	"/leasehold.v1.Queues/Send":        RoleWorker,
	"/leasehold.v1.Queues/SendBatch":   RoleWorker,
	"/leasehold.v1.Queues/Receive":     RoleWorker,
	"/leasehold.v1.Queues/Ack":         RoleWorker,
	"/leasehold.v1.Queues/AckBatch":    RoleWorker,
	"/leasehold.v1.Queues/Nack":        RoleWorker,
	"/leasehold.v1.Queues/Extend":      RoleWorker,
	"/leasehold.v1.Queues/List":        RoleOperator,
	"/leasehold.v1.Queues/Get":         RoleOperator,
	"/leasehold.v1.Queues/DeadLetters": RoleOperator,
	"/leasehold.v1.Queues/Create":      RoleAdmin,
	"/leasehold.v1.Queues/Purge":       RoleAdmin,
	"/leasehold.v1.Queues/Delete":      RoleAdmin,
	"/leasehold.v1.Queues/Redrive":     RoleAdmin,
}

// names lists the resources or keys a request touches, for prefix checks.
func names(msg any) []string {
	switch m := msg.(type) {
	case *pb.AcquireRequest:
		return m.Resources
	case *pb.BatchRequest:
		var out []string
		for _, op := range m.GetOps() {
			out = append(out, op.GetAcquire().GetResources()...)
		}
		return out
	case *pb.PutRequest:
		return append([]string{m.Key}, fenceName(m.Fence)...)
	case *pb.DeleteRequest:
		return append([]string{m.Key}, fenceName(m.Fence)...)
	case *pb.KVGetRequest:
		return []string{m.Key}
	case *pb.CheckFenceRequest:
		return fenceName(&pb.Fence{Resource: m.Resource, Group: m.Group, Queue: m.Queue})
	case *pb.IdempotencyBeginRequest:
		return []string{m.Key}
	case *pb.IdempotencyCompleteRequest:
		return []string{m.Key}
	case *pb.IdempotencyAbandonRequest:
		return []string{m.Key}
	case *pb.IdempotencyGetRequest:
		return []string{m.Key}
	case *pb.IdempotencyListRequest:
		return []string{m.Prefix}
	case *pb.TxnRequest:
		return txnNames(m)
	case *pb.KVListRequest:
		return []string{m.Prefix} // a worker lists only inside its prefixes
	case *pb.CampaignRequest:
		return []string{m.Election}
	case *pb.LeaderRequest:
		return []string{m.Election}
	case *pb.ObserveRequest:
		return []string{m.Election}
	case *pb.QueuesSendRequest:
		return []string{m.Queue}
	case *pb.QueuesSendBatchRequest:
		return []string{m.Queue}
	case *pb.QueuesReceiveRequest:
		return []string{m.Queue}
	case *pb.QueuesAckRequest:
		return []string{m.Queue}
	case *pb.QueuesAckBatchRequest:
		return []string{m.Queue}
	case *pb.QueuesNackRequest:
		return []string{m.Queue}
	case *pb.QueuesExtendRequest:
		return []string{m.Queue}
	case *pb.GroupsGetRequest:
		return []string{m.Group}
	case *pb.GroupsJoinRequest:
		return []string{m.Group}
	case *pb.GroupsAckRevocationRequest:
		return []string{m.Group}
	case *pb.GroupsAssignmentsRequest:
		return []string{m.Group}
	}
	return nil
}

// txnNames is every key a transaction reads or writes, and its fence's
// target: a worker may compare only keys it may write.
func txnNames(m *pb.TxnRequest) []string {
	out := fenceName(m.Fence)
	for _, c := range m.Compares {
		out = append(out, c.GetKey())
	}
	for _, op := range append(m.ThenOps[:len(m.ThenOps):len(m.ThenOps)], m.ElseOps...) {
		out = append(out, op.GetPut().GetKey()+op.GetDelete().GetKey())
	}
	return out
}

// fenceName is the names a fence's target lies under: its resource, group
// or queue (a worker fences only what its prefixes cover). Each one named
// is checked, so a fence naming two (refused later) cannot pass on their
// concatenation.
func fenceName(f *pb.Fence) []string {
	if f == nil {
		return nil
	}
	var out []string
	for _, n := range []string{f.Resource, f.Group, f.Queue} {
		if n != "" {
			out = append(out, n)
		}
	}
	if out == nil {
		return []string{""}
	}
	return out
}

type principalKey struct{}

// Identity names the authenticated caller of ctx's request ("anonymous"
// when the node runs without auth).
func Identity(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(Principal); ok {
		return p.Name
	}
	return "anonymous"
}

var anonymous = Principal{Name: "anonymous", Role: RoleAdmin}

// guard is the interceptor that authenticates and authorizes every
// request, and names the client its acquisitions are charged to.
type guard struct {
	auth *Authenticator  // nil: no auth (loopback or --insecure)
	base context.Context // canceled when the server shuts down
}

func (g *guard) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		p := anonymous
		if g.auth != nil {
			var err error
			if p, err = g.auth.authenticate(req.Header().Get("Authorization")); err != nil {
				return nil, err
			}
		}
		proc := req.Spec().Procedure
		need, ok := required[proc]
		if !ok {
			need = RoleAdmin
		}
		if p.Role < need {
			return nil, leasehold.Errorf(leasehold.CodePermission,
				"token %q has role %s; %s needs %s", p.Name, p.Role, proc, need)
		}
		if p.Role == RoleWorker {
			if err := p.mayTouch(names(req.Any())); err != nil {
				return nil, err
			}
		}
		ctx = context.WithValue(ctx, principalKey{}, p)
		if req.Header().Get(forwardedHeader) == "" {
			// The handler charges the acquisitions it accepts to this key;
			// a forwarded request was charged where it arrived.
			key := p.Name
			if g.auth == nil {
				key, _, _ = net.SplitHostPort(req.Peer().Addr)
			}
			ctx = context.WithValue(ctx, rateKey{}, key)
		}
		res, err := next(ctx, req)
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

// WrapStreamingHandler authenticates and authorizes the streaming calls
// (watches): the request message comes later, so the handler checks the
// prefixes of a worker, found in ctx.
func (g *guard) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		p := anonymous
		if g.auth != nil {
			var err error
			if p, err = g.auth.authenticate(conn.RequestHeader().Get("Authorization")); err != nil {
				return api.ToConnect(err)
			}
		}
		proc := conn.Spec().Procedure
		need, ok := required[proc]
		if !ok || conn.Spec().StreamType == connect.StreamTypeClient {
			return api.ToConnect(leasehold.Errorf(leasehold.CodeInvalid, "%s is not a streaming call served here", proc))
		}
		if p.Role < need {
			return api.ToConnect(leasehold.Errorf(leasehold.CodePermission,
				"token %q has role %s; %s needs %s", p.Name, p.Role, proc, need))
		}
		ctx = context.WithValue(ctx, principalKey{}, p)
		if conn.Spec().StreamType == connect.StreamTypeBidi {
			// A session charges its acquisitions as unary calls do.
			key := p.Name
			if g.auth == nil {
				key, _, _ = net.SplitHostPort(conn.Peer().Addr)
			}
			ctx = context.WithValue(ctx, rateKey{}, key)
		}
		return next(ctx, conn)
	}
}
