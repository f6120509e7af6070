package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

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
	"/leasehold.v1.Admin/Locks":            RoleOperator,
	"/leasehold.v1.Admin/Audit":            RoleOperator,
	"/leasehold.v1.Admin/ForceRelease":     RoleAdmin,
	"/leasehold.v1.Cluster/Members":        RoleOperator,
	"/leasehold.v1.Cluster/Status":         RoleOperator,
	"/leasehold.v1.Cluster/AddVoter":       RoleAdmin,
	"/leasehold.v1.Cluster/RemoveServer":   RoleAdmin,
	"/leasehold.v1.Cluster/TransferLeader": RoleAdmin,
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
		return []string{m.Resource}
	}
	return nil
}

// acquisitions counts the acquires a request makes, for the rate limit.
func acquisitions(msg any) int {
	switch m := msg.(type) {
	case *pb.AcquireRequest:
		return 1
	case *pb.BatchRequest:
		n := 0
		for _, op := range m.GetOps() {
			if op.GetAcquire() != nil {
				n++
			}
		}
		return n
	}
	return 0
}

func fenceName(f *pb.Fence) []string {
	if f == nil {
		return nil
	}
	return []string{f.Resource}
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

// guard is the interceptor that authenticates, authorizes and rate-limits
// every request.
type guard struct {
	auth *Authenticator // nil: no auth (loopback or --insecure)
	rate *rateLimiter
	base context.Context // canceled when the server shuts down
}

func (g *guard) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		p := anonymous
		if g.auth != nil {
			var err error
			if p, err = g.auth.authenticate(req.Header().Get("Authorization")); err != nil {
				return nil, api.ToConnect(err)
			}
		}
		proc := req.Spec().Procedure
		need, ok := required[proc]
		if !ok {
			need = RoleAdmin
		}
		if p.Role < need {
			return nil, api.ToConnect(leasehold.Errorf(leasehold.CodePermission,
				"token %q has role %s; %s needs %s", p.Name, p.Role, proc, need))
		}
		if p.Role == RoleWorker {
			for _, n := range names(req.Any()) {
				if !p.allows(n) {
					return nil, api.ToConnect(leasehold.Errorf(leasehold.CodePermission,
						"token %q may not touch %q: it is outside the token's prefixes %q", p.Name, n, p.Prefixes))
				}
			}
		}
		if n := acquisitions(req.Any()); n > 0 && req.Header().Get(forwardedHeader) == "" {
			key := p.Name
			if g.auth == nil {
				key, _, _ = net.SplitHostPort(req.Peer().Addr)
			}
			if err := g.rate.allow(key, n); err != nil {
				return nil, api.ToConnect(err)
			}
		}
		res, err := next(context.WithValue(ctx, principalKey{}, p), req)
		if err != nil && g.base.Err() != nil && connect.CodeOf(err) == connect.CodeCanceled {
			// Cut off by this node's shutdown, not by the caller: tell the
			// caller to retry (with the same request ID) elsewhere.
			err = api.ToConnect(leasehold.Errorf(leasehold.CodeUnavailable,
				"this node is shutting down; retry on another node"))
		}
		return res, err
	}
}

func (g *guard) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (g *guard) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return api.ToConnect(leasehold.Errorf(leasehold.CodeInvalid, "streaming calls are not served"))
	}
}

// rateLimiter is a token bucket per client: rate acquisitions a second,
// with a burst of twice that. Idle buckets are dropped. A batch of more
// acquires than the burst is let through when the bucket is full and
// leaves it in debt, so the rate still holds on average.
type rateLimiter struct {
	rate    float64
	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(rate float64) *rateLimiter {
	return &rateLimiter{rate: rate, buckets: map[string]*bucket{}}
}

// allow takes n acquisitions (n ≥ 1) from key's bucket, or refuses all n.
func (r *rateLimiter) allow(key string, n int) error {
	if r == nil || r.rate <= 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if now.Sub(r.swept) > time.Minute {
		for k, b := range r.buckets {
			if now.Sub(b.last) > time.Minute {
				delete(r.buckets, k)
			}
		}
		r.swept = now
	}
	b := r.buckets[key]
	if b == nil {
		b = &bucket{tokens: 2 * r.rate, last: now}
		r.buckets[key] = b
	}
	b.tokens = min(2*r.rate, b.tokens+now.Sub(b.last).Seconds()*r.rate)
	b.last = now
	if b.tokens < min(float64(n), max(1, 2*r.rate)) {
		return leasehold.Errorf(leasehold.CodeLimit,
			"client %q is over %.0f acquisitions a second (limit acquire_rate); slow down and retry", key, r.rate)
	}
	b.tokens -= float64(n)
	return nil
}
