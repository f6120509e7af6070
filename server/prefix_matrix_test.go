package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// Tokens limited to the prefix a/, one per role, and one unlimited admin.
var prefixed = []struct {
	name, token string
	role        api.Role
}{
	{"wa", "prefixed-worker-token-0123", api.RoleWorker},
	{"oa", "prefixed-operator-token-0123", api.RoleOperator},
	{"aa", "prefixed-admin-token-0123", api.RoleAdmin},
}

const rootToken = "unlimited-admin-token-0123"

// prefixNode is a node whose tokens are prefixed's (limited to a/) and
// root (an admin limited to nothing).
func prefixNode(t *testing.T, opts ...func(*server.Config)) *testcluster.Node {
	t.Helper()
	f := server.AuthFile{Tokens: []server.TokenEntry{{Name: "root", SHA256: server.HashToken(rootToken), Role: "admin"}}}
	for _, p := range prefixed {
		f.Tokens = append(f.Tokens, server.TokenEntry{Name: p.name, SHA256: server.HashToken(p.token), Role: p.role.String(), Prefixes: []string{"a/"}})
	}
	auth, err := server.NewAuthenticator(f)
	if err != nil {
		t.Fatal(err)
	}
	return testcluster.StartServerNode(t, func(c *server.Config) {
		c.Auth = auth
		for _, o := range opts {
			o(c)
		}
	})
}

// fill sets every string of m, and of the leasehold messages it holds (the
// first field of each oneof, one element of each list), to name: a request
// that touches name wherever its procedure's scope looks.
func fill(m protoreflect.Message, name string, depth int) {
	fs := m.Descriptor().Fields()
	oneofs := map[protoreflect.FullName]bool{}
	for i := range fs.Len() {
		fd := fs.Get(i)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
			if oneofs[o.FullName()] {
				continue
			}
			oneofs[o.FullName()] = true
		}
		switch {
		case fd.IsMap():
		case fd.Kind() == protoreflect.StringKind && fd.IsList():
			m.Mutable(fd).List().Append(protoreflect.ValueOfString(name))
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(name))
		case fd.Kind() == protoreflect.MessageKind && depth < 3 && fd.Message().FullName().Parent() == "leasehold.v1":
			if fd.IsList() {
				fill(m.Mutable(fd).List().AppendMutable().Message(), name, depth+1)
			} else {
				fill(m.Mutable(fd).Message(), name, depth+1)
			}
		}
	}
}

// call calls procedure row once with a request filled with name, as
// token, and returns its error (a stream's: opening it and reading its
// first message).
func call(t *testing.T, hc connect.HTTPClient, url, token string, row *api.Procedure, name string) error {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(strings.ReplaceAll(strings.TrimPrefix(row.Name, "/"), "/", ".")))
	if err != nil {
		t.Fatal(err)
	}
	md := d.(protoreflect.MethodDescriptor)
	req := dynamicpb.NewMessage(md.Input())
	fill(req, name, 0)
	c := connect.NewClient[dynamicpb.Message, dynamicpb.Message](hc, url+row.Name, connect.WithSchema(md),
		connect.WithResponseInitializer(func(_ connect.Spec, msg any) error {
			*msg.(*dynamicpb.Message) = *dynamicpb.NewMessage(md.Output())
			return nil
		}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := connect.NewRequest(req)
	r.Header().Set("Authorization", "Bearer "+token)
	if !row.Streams() {
		_, err := c.CallUnary(ctx, r)
		return err
	}
	s, err := c.CallServerStream(ctx, r)
	if err != nil {
		return err
	}
	defer s.Close()
	s.Receive()
	return s.Err()
}

// refusedForPrefix says err is the guard's refusal of a name outside the
// token's prefixes, or of a call on every tenant's data.
func refusedForPrefix(err error) bool {
	var ce *connect.Error
	return errors.As(err, &ce) && ce.Code() == connect.CodePermissionDenied &&
		(strings.Contains(ce.Message(), "is not under them") || strings.Contains(ce.Message(), "every tenant's data"))
}

func refusedForRole(err error) bool {
	var ce *connect.Error
	return errors.As(err, &ce) && ce.Code() == connect.CodePermissionDenied && strings.Contains(ce.Message(), " needs ")
}

// Every procedure of the table, called by a worker, an operator and an
// admin limited to a/, with a request naming a/ and one naming b/ wherever
// the procedure reads names: the role decides, and past it, what lies
// outside a/ is refused for every role, what acts on every tenant is
// refused to all three, and nothing inside a/ is refused for its prefix.
func TestPrefixesBindEveryRoleInEveryProcedure(t *testing.T) {
	n := prefixNode(t)
	hc := h2cClient(t)
	for _, row := range api.Procedures() {
		if row.Scope.Kind == api.ScopePerOp {
			continue // the session stream: TestPrefixesBindEveryRoleOnTheSession
		}
		for _, tok := range prefixed {
			t.Run(fmt.Sprintf("%s/%s", row.Short(), tok.name), func(t *testing.T) {
				inside := call(t, hc, n.URL, tok.token, row, fmt.Sprintf("a/%s/%s", tok.name, row.Short()))
				outside := call(t, hc, n.URL, tok.token, row, fmt.Sprintf("b/%s/%s", tok.name, row.Short()))
				switch {
				case tok.role < row.Role:
					if !refusedForRole(inside) || !refusedForRole(outside) {
						t.Fatalf("role %s calling %s (needs %s): %v / %v, want both refused for the role", tok.role, row.Name, row.Role, inside, outside)
					}
				case row.Scope.Kind == api.ScopeCluster:
					if !refusedForPrefix(inside) || !refusedForPrefix(outside) {
						t.Fatalf("%s acts on every tenant: %v / %v, want both refused to a token limited to a/", row.Name, inside, outside)
					}
				case row.Scope.Kind == api.ScopeNames:
					if refusedForPrefix(inside) || refusedForRole(inside) {
						t.Fatalf("%s naming a/: %v, want it past the guard", row.Name, inside)
					}
					if !refusedForPrefix(outside) {
						t.Fatalf("%s naming b/: %v, want permission_denied for the prefix", row.Name, outside)
					}
				default: // names nothing of a tenant's: the secret, node status, filtered answers
					if refusedForPrefix(inside) || refusedForPrefix(outside) || refusedForRole(inside) {
						t.Fatalf("%s (%s): %v / %v, want neither refused", row.Name, row.Scope.Doc(), inside, outside)
					}
				}
			})
		}
	}
}

// The session stream checks each op as its unary call: every procedure it
// carries (as a Batch op or as a call), sent by each limited token naming
// a/ and b/.
func TestPrefixesBindEveryRoleOnTheSession(t *testing.T) {
	n := prefixNode(t)
	hc := h2cClient(t)
	sessions := leaseholdv1connect.NewSessionsClient(hc, n.URL)
	for _, tok := range prefixed {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s := sessions.Session(ctx)
		s.RequestHeader().Set("Authorization", "Bearer "+tok.token)
		type sent struct {
			row    *api.Procedure
			inside bool
		}
		ops := map[uint64]sent{}
		var req pb.SessionRequest
		for _, row := range api.Procedures() {
			if row.Session != api.SessionOp && row.Session != api.SessionCall {
				continue
			}
			for _, inside := range []bool{true, false} {
				name := fmt.Sprintf("b/%s/%s", tok.name, row.Short())
				if inside {
					name = "a" + name[1:]
				}
				msg := row.NewRequest()
				fill(msg.ProtoReflect(), name, 0)
				op, _ := api.SessionOpOf(msg)
				if row.Session == api.SessionOp {
					op = sessionBatchOp(msg)
				}
				op.Id = uint64(len(ops) + 1)
				ops[op.Id] = sent{row, inside}
				req.Ops = append(req.Ops, op)
			}
		}
		if err := s.Send(&req); err != nil {
			t.Fatal(err)
		}
		for len(ops) > 0 {
			res, err := s.Receive()
			if err != nil {
				t.Fatalf("%s: the stream ended with %d ops unanswered: %v", tok.name, len(ops), err)
			}
			for _, r := range res.Results {
				o := ops[r.Id]
				delete(ops, r.Id)
				e := r.GetResult().GetError()
				refused := e.GetCode() == "permission_denied" && strings.Contains(e.GetMessage(), "is not under them")
				wantRefused := !o.inside && o.row.Scope.Kind == api.ScopeNames
				if refused != wantRefused {
					t.Errorf("%s on the stream, %s, inside a/ %v: %v; want refused for the prefix: %v", o.row.Name, tok.name, o.inside, e, wantRefused)
				}
			}
		}
		s.CloseRequest()
		s.CloseResponse()
		cancel()
	}
}

// sessionBatchOp is the Batch op of a lease request (acquire, renew,
// release).
func sessionBatchOp(msg proto.Message) *pb.SessionOp {
	switch m := msg.(type) {
	case *pb.AcquireRequest:
		m.Wait = nil
		return &pb.SessionOp{Op: &pb.BatchOp{Op: &pb.BatchOp_Acquire{Acquire: m}}}
	case *pb.RenewRequest:
		return &pb.SessionOp{Op: &pb.BatchOp{Op: &pb.BatchOp_Renew{Renew: m}}}
	case *pb.ReleaseRequest:
		return &pb.SessionOp{Op: &pb.BatchOp{Op: &pb.BatchOp_Release{Release: m}}}
	}
	panic(fmt.Sprintf("no batch op carries %T", msg))
}
