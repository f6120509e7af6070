package server

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// protoCodec is connect's binary protobuf codec, except that a string field
// holding invalid UTF-8 is reported by its name: the protobuf decoder only
// says "string field contains invalid UTF-8".
type protoCodec struct{}

func (protoCodec) Name() string   { return "proto" }
func (protoCodec) IsBinary() bool { return true }

func (protoCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", m)
	}
	return proto.Marshal(pm)
}

func (protoCodec) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", m)
	}
	err := proto.Unmarshal(b, pm)
	if err == nil {
		return nil
	}
	if f := badUTF8Field(b, pm.ProtoReflect().Descriptor()); f != "" {
		return fmt.Errorf("%s is not valid UTF-8", f)
	}
	return err
}

// badUTF8Field names the first string field of b, a message of type md,
// that is not valid UTF-8, or returns "".
func badUTF8Field(b []byte, md protoreflect.MessageDescriptor) string {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return ""
		}
		val := b[:m]
		b = b[m:]
		fd := md.Fields().ByNumber(num)
		if fd == nil || typ != protowire.BytesType {
			continue
		}
		v, _ := protowire.ConsumeBytes(val)
		switch fd.Kind() {
		case protoreflect.StringKind:
			if !utf8.Valid(v) {
				return string(fd.Name())
			}
		case protoreflect.MessageKind:
			if f := badUTF8Field(v, fd.Message()); f != "" {
				if fd.IsMap() {
					return string(fd.Name()) + " " + f // "metadata key", "metadata value"
				}
				return string(fd.Name()) + "." + f
			}
		}
	}
	return ""
}
