package api

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// The session stream carries a SessionCall procedure's request in the
// field of SessionOp's `call` oneof that has its type, and its answer in
// the field of SessionResult's `call` that has the response's type. Both
// ends find the fields here, by type, so neither keeps a switch of them.
var (
	opCalls     = callFields((&pb.SessionOp{}).ProtoReflect().Descriptor())
	resultCalls = callFields((&pb.SessionResult{}).ProtoReflect().Descriptor())
	callOf      = map[protoreflect.FullName]*Procedure{} // by request type
)

func init() {
	for _, p := range procedures {
		if p.Session == SessionCall {
			callOf[p.NewRequest().ProtoReflect().Descriptor().FullName()] = p
		}
	}
}

// callFields are the fields of d's `call` oneof, by message type.
func callFields(d protoreflect.MessageDescriptor) map[protoreflect.FullName]protoreflect.FieldDescriptor {
	out := map[protoreflect.FullName]protoreflect.FieldDescriptor{}
	fs := d.Oneofs().ByName("call").Fields()
	for i := range fs.Len() {
		out[fs.Get(i).Message().FullName()] = fs.Get(i)
	}
	return out
}

// SessionOpOf is the session op that carries request msg, or nil if msg
// is not the request of a procedure the stream carries as a call. waits
// says the call may wait (its request sets `wait`).
func SessionOpOf(msg proto.Message) (op *pb.SessionOp, waits bool) {
	m := msg.ProtoReflect()
	name := m.Descriptor().FullName()
	fd := opCalls[name]
	if fd == nil || callOf[name] == nil {
		return nil, false
	}
	op = &pb.SessionOp{}
	op.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(m))
	return op, waitsOf(m)
}

// waitsOf says m sets a `wait` longer than zero.
func waitsOf(m protoreflect.Message) bool {
	fd := m.Descriptor().Fields().ByName("wait")
	if fd == nil || !m.Has(fd) {
		return false
	}
	w, ok := m.Get(fd).Message().Interface().(*durationpb.Duration)
	return ok && w.AsDuration() > 0
}

// CallOf is the procedure and the request of the call op carries, or nil
// if it carries none (or one of a type no row rides the stream as).
func CallOf(op *pb.SessionOp) (*Procedure, proto.Message) {
	m := op.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("call"))
	if fd == nil {
		return nil, nil
	}
	p := callOf[fd.Message().FullName()]
	if p == nil {
		return nil, nil
	}
	return p, m.Get(fd).Message().Interface()
}

// SetAnswer puts a call's response res in r.
func SetAnswer(r *pb.SessionResult, res proto.Message) {
	m := res.ProtoReflect()
	r.ProtoReflect().Set(resultCalls[m.Descriptor().FullName()], protoreflect.ValueOfMessage(m))
}

// AnswerOf is the call's response r carries, or nil.
func AnswerOf(r *pb.SessionResult) proto.Message {
	m := r.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("call"))
	if fd == nil {
		return nil
	}
	return m.Get(fd).Message().Interface()
}
