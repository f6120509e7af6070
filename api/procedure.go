package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
)

// Procedure is what the node and the client know of one RPC: one row of
// the procedure table (procedures.go). Auth, forwarding, both ends of the
// session stream, the docs and the metrics read it from there, so adding an
// RPC is adding its row.
type Procedure struct {
	// Name is the Connect procedure, "/leasehold.v1.Leases/Acquire".
	Name string
	Row

	newRequest func() proto.Message
	dial       func(hc connect.HTTPClient, url string) Caller // nil for a stream
	bind       func(h any) (Handler, bool)                    // nil for a stream
}

// Row is a procedure's columns.
type Row struct {
	// Role is the least role a token needs to call it.
	Role Role
	// Scope is how to read the names it touches, which a token limited to
	// prefixes must hold.
	Scope Scope
	// Route says which node answers it.
	Route Route
	// Session says whether and how it rides the session stream.
	Session Session
	// Rate is what it is charged to its caller's rate limit.
	Rate Rate
	// Retry says what makes sending it again safe.
	Retry Retry
}

// Role orders what a bearer token may do; each role may do all that the
// ones below it may.
type Role int

const (
	RoleWorker   Role = iota + 1 // acquire, renew, release, fenced KV, queues, ...
	RoleOperator                 // plus inspection, audit and cluster status
	RoleAdmin                    // plus forced release, queue and group removal, membership, snapshots
)

// RoleNames are the roles by their names in the auth file.
var RoleNames = map[string]Role{"worker": RoleWorker, "operator": RoleOperator, "admin": RoleAdmin}

func (r Role) String() string {
	for n, v := range RoleNames {
		if v == r {
			return n
		}
	}
	return "none"
}

// Route says which node answers a procedure.
type Route int

const (
	// RouteLeader: only the leader answers; a follower forwards the call
	// there (once) over the raft port.
	RouteLeader Route = iota + 1
	// RouteAnyNode: the node called answers from its own state (streams,
	// node status).
	RouteAnyNode
)

func (r Route) String() string { return [...]string{"", "leader", "any node"}[r] }

// Session says whether and how a procedure rides the session stream.
type Session int

const (
	SessionNone Session = iota
	// SessionOp: as an op of a Batch (SessionOp.op): acquire, renew, release.
	SessionOp
	// SessionCall: as the SessionOp.call field of its request type, answered
	// by the SessionResult.call field of its response type. A call whose
	// request sets `wait` may wait as long (Waits).
	SessionCall
	// SessionStream: it is the stream.
	SessionStream
)

func (s Session) String() string { return [...]string{"-", "op", "call", "the stream"}[s] }

// Rate is what a procedure is charged to its caller's acquisition rate
// (--acquire-rate), on the node it arrives at and again, forwarded, on the
// leader.
type Rate int

const (
	RateNone Rate = iota
	// RateAcquire: one for each acquisition it makes that passes
	// validation (a Batch and a session stream: one per acquire op).
	RateAcquire
)

func (r Rate) String() string { return [...]string{"-", "acquisitions"}[r] }

// Retry says what makes a procedure safe to send again after a lost
// answer (the Go client retries every call on unavailable).
type Retry int

const (
	// RetryRead: it changes nothing.
	RetryRead Retry = iota + 1
	// RetryRequestID: a retry with the same request_id (or lease secret)
	// answers as the first did, without acting twice.
	RetryRequestID
	// RetryByValue: acting twice leaves what acting once does.
	RetryByValue
	// RetryUnsafe: a retry may act twice.
	RetryUnsafe
)

func (r Retry) String() string {
	return [...]string{"", "read only", "request id", "same values", "unsafe"}[r]
}

// Scope is how to read, from a request, the names it touches: lease
// resources, KV and idempotency keys, queue, group and election names, or
// the prefix a list or watch asks for. A token limited to prefixes may
// call a procedure only if every name lies under one of them.
type Scope struct {
	Kind ScopeKind
	// Of says what the names are, for the docs ("resources", "key").
	Of    string
	names func(proto.Message) []string
}

// ScopeKind sorts scopes.
type ScopeKind int

const (
	// ScopeNames: the request names what it touches (Names).
	ScopeNames ScopeKind = iota + 1
	// ScopeSecret: it names nothing; the lease secret it carries is the
	// proof (renew, release, resign, leave).
	ScopeSecret
	// ScopeNode: it tells of the nodes, nothing of any tenant's.
	ScopeNode
	// ScopeFiltered: its answer leaves out what lies outside the token's
	// prefixes (the audit log).
	ScopeFiltered
	// ScopePerOp: each op of the stream is checked as its own call.
	ScopePerOp
	// ScopeCluster: it acts on every tenant's data (membership, a
	// snapshot of the whole state): a token limited to prefixes may not.
	ScopeCluster
)

// Names are the names msg touches (for ScopeNames; nil otherwise).
func (s Scope) Names(msg any) []string {
	if s.names == nil {
		return nil
	}
	return s.names(msg.(proto.Message))
}

// Doc says what a token's prefixes are checked on.
func (s Scope) Doc() string {
	switch s.Kind {
	case ScopeNames:
		return s.Of
	case ScopeSecret:
		return "- (the lease secret)"
	case ScopeNode:
		return "- (node status only)"
	case ScopeFiltered:
		return s.Of + ", outside ones left out"
	case ScopePerOp:
		return "each op, as its call"
	case ScopeCluster:
		return "refused: every tenant's"
	}
	return "?"
}

// touches is a ScopeNames scope: of names what f reads from a request.
func touches[Req any](of string, f func(*Req) []string) Scope {
	return Scope{Kind: ScopeNames, Of: of, names: func(m proto.Message) []string { return f(any(m).(*Req)) }}
}

// listing is the scope of a list or watch: the prefix it asks for must
// lie under the token's, so all it answers does too.
func listing[Req any](f func(*Req) []string) Scope { return touches("prefix", f) }

var (
	bySecret     = Scope{Kind: ScopeSecret}
	nodeOnly     = Scope{Kind: ScopeNode}
	perOp        = Scope{Kind: ScopePerOp}
	wholeCluster = Scope{Kind: ScopeCluster}
	auditRecords = Scope{Kind: ScopeFiltered, Of: "records' resources"}
)

// Caller calls one unary procedure at one node.
type Caller interface {
	// CallUnary sends msg (of the procedure's request type) with header,
	// and returns the typed *connect.Response.
	CallUnary(ctx context.Context, msg proto.Message, header http.Header) (connect.AnyResponse, error)
}

// Handler is a unary handler with its message types erased: how a session
// stream runs the calls it carries through the very unary handler.
type Handler func(ctx context.Context, msg proto.Message) (proto.Message, error)

// Dial is a Caller of p at the node whose API (or forwarding listener) is
// at url, through hc. It panics for a stream.
func (p *Procedure) Dial(hc connect.HTTPClient, url string) Caller { return p.dial(hc, url) }

// Bind erases the types of h, p's unary handler (a func(context.Context,
// *connect.Request[Req]) (*connect.Response[Res], error)); false if h is
// not one, or p is a stream.
func (p *Procedure) Bind(h any) (Handler, bool) {
	if p.bind == nil {
		return nil, false
	}
	return p.bind(h)
}

// Streams says p is a streaming procedure (the row of stream).
func (p *Procedure) Streams() bool { return p.dial == nil }

// NewRequest is a new, empty request of p.
func (p *Procedure) NewRequest() proto.Message { return p.newRequest() }

// Service and Method split Name: "leasehold.v1.Leases", "Acquire".
func (p *Procedure) Service() string {
	s, _, _ := strings.Cut(strings.TrimPrefix(p.Name, "/"), "/")
	return s
}

func (p *Procedure) Method() string { return p.Name[strings.LastIndexByte(p.Name, '/')+1:] }

// Short is "Leases.Acquire", the procedure's metric label.
func (p *Procedure) Short() string {
	return strings.TrimPrefix(p.Service(), "leasehold.v1.") + "." + p.Method()
}

// unary is the row of a unary procedure with request Req and response
// Res.
func unary[Req, Res any](name string, row Row) *Procedure {
	return &Procedure{Name: name, Row: row,
		newRequest: func() proto.Message { return any(new(Req)).(proto.Message) },
		dial: func(hc connect.HTTPClient, url string) Caller {
			return caller[Req, Res]{connect.NewClient[Req, Res](hc, url+name)}
		},
		bind: func(h any) (Handler, bool) {
			f, ok := h.(func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error))
			if !ok {
				return nil, false
			}
			return func(ctx context.Context, msg proto.Message) (proto.Message, error) {
				res, err := f(ctx, connect.NewRequest(any(msg).(*Req)))
				if err != nil {
					return nil, err
				}
				return any(res.Msg).(proto.Message), nil
			}, true
		},
	}
}

// stream is the row of a streaming procedure with request Req (its only
// one, or its first).
func stream[Req any](name string, row Row) *Procedure {
	return &Procedure{Name: name, Row: row, newRequest: func() proto.Message { return any(new(Req)).(proto.Message) }}
}

type caller[Req, Res any] struct{ c *connect.Client[Req, Res] }

func (c caller[Req, Res]) CallUnary(ctx context.Context, msg proto.Message, header http.Header) (connect.AnyResponse, error) {
	r := connect.NewRequest(any(msg).(*Req))
	for k, v := range header {
		r.Header()[k] = v
	}
	res, err := c.c.CallUnary(ctx, r)
	if err != nil {
		return nil, err // not a typed nil response
	}
	return res, nil
}

var byName = func() map[string]*Procedure {
	m := make(map[string]*Procedure, len(procedures))
	for _, p := range procedures {
		if m[p.Name] != nil {
			panic(fmt.Sprintf("api: procedure %s has two rows", p.Name))
		}
		m[p.Name] = p
	}
	return m
}()

// Lookup is the row of the procedure named name, or nil for one without
// a row (which the node serves to no one).
func Lookup(name string) *Procedure { return byName[name] }

// Procedures are every row, in the table's order.
func Procedures() []*Procedure { return procedures }
