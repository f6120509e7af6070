package api_test

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// generated is every method of the generated leasehold.v1 services, by
// procedure name.
func generated(t *testing.T) map[string]protoreflect.MethodDescriptor {
	t.Helper()
	out := map[string]protoreflect.MethodDescriptor{}
	protoregistry.GlobalFiles.RangeFilesByPackage("leasehold.v1", func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			s := f.Services().Get(i)
			for j := range s.Methods().Len() {
				m := s.Methods().Get(j)
				out[fmt.Sprintf("/%s/%s", s.FullName(), m.Name())] = m
			}
		}
		return true
	})
	if len(out) == 0 {
		t.Fatal("no generated leasehold.v1 service is registered")
	}
	return out
}

// The table has a row for every generated procedure, and every row names
// one, with its request type and its kind (unary or stream).
func TestEveryProcedureHasARow(t *testing.T) {
	methods := generated(t)
	for name, m := range methods {
		p := api.Lookup(name)
		if p == nil {
			t.Errorf("%s has no row in the procedure table (api/procedures.go): the node would serve it to no one", name)
			continue
		}
		if got := p.NewRequest().ProtoReflect().Descriptor().FullName(); got != m.Input().FullName() {
			t.Errorf("%s: the row's request is %s; the method takes %s", name, got, m.Input().FullName())
		}
		if streams := m.IsStreamingClient() || m.IsStreamingServer(); streams != p.Streams() {
			t.Errorf("%s: the method streams: %v; its row is a stream: %v", name, streams, p.Streams())
		}
	}
	for _, p := range api.Procedures() {
		if methods[p.Name] == nil {
			t.Errorf("the row %s names no generated procedure", p.Name)
		}
	}
}

// Each column holds a value a reader can act on: a role, a route, a retry
// rule, and a scope whose names can be read from an empty request.
func TestEveryRowIsComplete(t *testing.T) {
	methods := generated(t)
	for _, p := range api.Procedures() {
		switch {
		case p.Role < api.RoleWorker || p.Role > api.RoleAdmin:
			t.Errorf("%s: no role", p.Name)
		case p.Route != api.RouteLeader && p.Route != api.RouteAnyNode:
			t.Errorf("%s: no route", p.Name)
		case p.Retry == 0:
			t.Errorf("%s: no retry rule", p.Name)
		case p.Scope.Kind == 0:
			t.Errorf("%s: no scope", p.Name)
		}
		p.Scope.Names(p.NewRequest()) // panics if the scope reads another type
		m := methods[p.Name]
		if m == nil {
			continue
		}
		if (m.IsStreamingClient() || m.IsStreamingServer()) && p.Route != api.RouteAnyNode {
			t.Errorf("%s streams: a stream is never forwarded, so it is answered by any node", p.Name)
		}
		if p.Retry == api.RetryRequestID && !carriesRetryKey(m.Input(), 0) {
			t.Errorf("%s is retried by request id, but %s has no request_id or secret", p.Name, m.Input().FullName())
		}
		if p.Retry == api.RetryRead && hasField(m.Input(), "request_id") {
			t.Errorf("%s is read only, but its request has a request_id", p.Name)
		}
	}
}

// carriesRetryKey says d, or a message it holds, has a request_id or a
// secret.
func carriesRetryKey(d protoreflect.MessageDescriptor, depth int) bool {
	if hasField(d, "request_id") || hasField(d, "secret") {
		return true
	}
	fs := d.Fields()
	for i := range fs.Len() {
		if m := fs.Get(i).Message(); m != nil && depth < 3 && m.FullName().Parent() == "leasehold.v1" && carriesRetryKey(m, depth+1) {
			return true
		}
	}
	return false
}

func hasField(d protoreflect.MessageDescriptor, name protoreflect.Name) bool {
	return d.Fields().ByName(name) != nil
}

// The session stream's `call` oneofs and the table agree: a row marked
// SessionCall has a SessionOp field of its request's type and a
// SessionResult field of its response's, and every such field belongs to
// a row so marked.
func TestSessionCallsMatchTheTable(t *testing.T) {
	methods := generated(t)
	ops := oneofTypes((&pb.SessionOp{}).ProtoReflect().Descriptor())
	results := oneofTypes((&pb.SessionResult{}).ProtoReflect().Descriptor())
	marked := map[protoreflect.FullName]bool{}
	for _, p := range api.Procedures() {
		if p.Session != api.SessionCall {
			continue
		}
		m := methods[p.Name]
		if m == nil {
			continue
		}
		marked[m.Input().FullName()], marked[m.Output().FullName()] = true, true
		if !ops[m.Input().FullName()] {
			t.Errorf("%s rides the session stream, but SessionOp.call has no %s", p.Name, m.Input().FullName())
		}
		if !results[m.Output().FullName()] {
			t.Errorf("%s rides the session stream, but SessionResult.call has no %s", p.Name, m.Output().FullName())
		}
		op, _ := api.SessionOpOf(p.NewRequest())
		if got, _ := api.CallOf(op); got != p {
			t.Errorf("%s: its request sent on the stream reads back as %v", p.Name, got)
		}
	}
	for name := range ops {
		if !marked[name] {
			t.Errorf("SessionOp.call carries %s, but no row marked SessionCall takes it", name)
		}
	}
	for name := range results {
		if !marked[name] {
			t.Errorf("SessionResult.call carries %s, but no row marked SessionCall answers it", name)
		}
	}
}

func oneofTypes(d protoreflect.MessageDescriptor) map[protoreflect.FullName]bool {
	out := map[protoreflect.FullName]bool{}
	fs := d.Oneofs().ByName("call").Fields()
	for i := range fs.Len() {
		out[fs.Get(i).Message().FullName()] = true
	}
	return out
}
