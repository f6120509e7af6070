package server

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// FuzzJSONCodec decodes arbitrary JSON into the request messages. The codec
// may refuse a body but never panics, never accepts an object with a key the
// message does not have, and what it accepts survives a round trip.
func FuzzJSONCodec(f *testing.F) {
	for _, s := range []string{
		`{"resources":["a"],"ttl":"10s"}`,
		`{"resources":["a"],"tll":"3600s"}`,
		`{"lock_delay":"1s","lockDelay":"2s"}`,
		`{"ops":[{"acquire":{"resources":["a"],"tll":"1s"}}]}`,
		`{"metadata":{"k":"v","tll":"x"}}`,
		`{"leaseId":"1","secret":"ab","progress":"p"}`,
		`{"key":"k","value":"AAE=","fence":{"resource":"r","token":"3"}}`,
		`{}`, `[]`, `null`, ``, `{"":1}`,
	} {
		for m := range requestTypes {
			f.Add(uint8(m), []byte(s))
		}
	}
	c := jsonCodecs()[0]
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		msg := requestTypes[int(which)%len(requestTypes)]()
		if err := c.Unmarshal(body, msg); err != nil {
			return
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) == nil {
			fields := msg.ProtoReflect().Descriptor().Fields()
			for k := range obj {
				if fields.ByJSONName(k) == nil && fields.ByName(protoreflect.Name(k)) == nil {
					t.Fatalf("accepted %s with unknown field %q", msg.ProtoReflect().Descriptor().Name(), k)
				}
			}
		}
		out, err := c.Marshal(msg)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", body, err)
		}
		again := msg.ProtoReflect().New().Interface()
		if err := c.Unmarshal(out, again); err != nil || !proto.Equal(msg, again) {
			t.Fatalf("round trip of %q: %q, %v", body, out, err)
		}
	})
}

var requestTypes = []func() proto.Message{
	func() proto.Message { return &pb.AcquireRequest{} },
	func() proto.Message { return &pb.RenewRequest{} },
	func() proto.Message { return &pb.ReleaseRequest{} },
	func() proto.Message { return &pb.BatchRequest{} },
	func() proto.Message { return &pb.PutRequest{} },
	func() proto.Message { return &pb.ListRequest{} },
}
