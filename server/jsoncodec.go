package server

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// jsonCodec is connect's JSON codec, except that a field the message does
// not have is refused instead of ignored: a misspelt "tll" must not quietly
// give the default TTL. connect registers its JSON codec under two names
// ("json" and "json; charset=utf-8"); both are replaced.
type jsonCodec struct{ name string }

func jsonCodecs() []jsonCodec {
	return []jsonCodec{{"json"}, {"json; charset=utf-8"}}
}

func (c jsonCodec) Name() string { return c.name }
func (jsonCodec) IsBinary() bool { return false }

func (jsonCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", m)
	}
	return protojson.Marshal(pm)
}

// MarshalAppend lets connect reuse its buffers, as with its own codec.
func (jsonCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", m)
	}
	return protojson.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (jsonCodec) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", m)
	}
	if len(b) == 0 {
		return errors.New("the body is empty: send a JSON object, {} at least")
	}
	if err := protojson.Unmarshal(b, pm); err != nil {
		return fmt.Errorf("the JSON is not a valid %s%s", pm.ProtoReflect().Descriptor().Name(), jsonProblem(err))
	}
	return nil
}

// jsonProblem turns protojson's `proto: (line 1:35): unknown field "tll"`
// into ` at line 1:35: unknown field "tll"`.
func jsonProblem(err error) string {
	msg := strings.TrimPrefix(err.Error(), "proto: ")
	if rest, ok := strings.CutPrefix(msg, "(line "); ok {
		if pos, what, ok := strings.Cut(rest, "): "); ok {
			return " at line " + pos + ": " + what
		}
	}
	return ": " + msg
}
