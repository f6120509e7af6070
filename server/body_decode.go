package server

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// encodingOf says how connect reads a request's body: a gRPC, gRPC-Web or
// Connect streaming body is a series of messages (enveloped), each maybe
// compressed with the encoding its header names; any other body is one
// message, maybe compressed whole (Content-Encoding).
func encodingOf(h http.Header) (enveloped bool, encoding string) {
	ct, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	switch {
	case ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") ||
		ct == "application/grpc-web" || strings.HasPrefix(ct, "application/grpc-web+"):
		return true, h.Get("Grpc-Encoding")
	case strings.HasPrefix(ct, "application/connect+"):
		return true, h.Get("Connect-Content-Encoding")
	}
	return false, h.Get("Content-Encoding")
}

// gzipHere is the handlers' gzip: responses are compressed as connect
// does, and requests were inflated by the body guard already, so a
// compressed message that reaches connect is refused rather than inflated
// uncounted.
var gzipHere = connect.WithCompression("gzip",
	func() connect.Decompressor { return decodedHere{} },
	func() connect.Compressor { return gzip.NewWriter(io.Discard) })

type decodedHere struct{}

var errNotDecoded = errors.New("a compressed message was not inflated by the node's body guard")

func (decodedHere) Read([]byte) (int, error) { return 0, errNotDecoded }
func (decodedHere) Reset(io.Reader) error    { return errNotDecoded }
func (decodedHere) Close() error             { return nil }

// inflater is a gzip stream inflated as it is read, its errors told
// apart from the body's own (the gzip reader is set up at the first
// read, since that reads the stream's header).
type inflater struct {
	b       *guardedBody
	in      io.Reader
	zr      gzip.Reader
	started bool
}

// reset makes f inflate in, reusing its gzip reader.
func (f *inflater) reset(in io.Reader) { f.in, f.started = in, false }

func (f *inflater) Read(p []byte) (int, error) {
	if !f.started {
		f.started = true
		if err := f.zr.Reset(f.in); err != nil {
			return 0, f.b.gzipErr(err)
		}
	}
	n, err := f.zr.Read(p)
	if err != nil {
		err = f.b.gzipErr(err)
	}
	return n, err
}

// gzipErr is err, from a gzip reader: the stream's end, the body's own
// error (a deadline, a limit, a broken connection), or gzip that does not
// decode, refused as invalid.
func (b *guardedBody) gzipErr(err error) error {
	var ce *connect.Error
	if err == io.EOF || errors.As(err, &ce) || (b.rawErr != nil && b.rawErr != io.EOF && errors.Is(err, b.rawErr)) {
		return err
	}
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("the request is compressed with gzip and does not decode: %w", err))
}

// envelopes is a body of messages, each a flags byte, a 4-byte length and
// the message, as connect must see it: a gzip message is inflated first
// (checked and charged as it inflates) and handed over uncompressed; any
// other passes as it comes, charged as it does. A message's bytes stay
// charged until the next message starts.
type envelopes struct {
	b    *guardedBody
	gzip bool // compressed messages are gzip; else connect refuses them
	f    inflater
	pre  [5]byte
	head []byte       // the prefix still to hand over
	msg  bytes.Buffer // an inflated message still to hand over
	left int64        // bytes of a message passed as it comes, still to come
}

const (
	flagCompressed = 1
	// keepMessageBuffer is the most an inflated message's buffer keeps
	// between messages: a stream that once sent a large message does not
	// hold its buffer uncharged.
	keepMessageBuffer = 64 << 10
)

func (e *envelopes) Read(p []byte) (int, error) {
	if len(e.head) == 0 && e.msg.Len() == 0 && e.left == 0 {
		if err := e.next(); err != nil {
			return 0, err
		}
	}
	switch {
	case len(e.head) > 0:
		n := copy(p, e.head)
		e.head = e.head[n:]
		return n, nil
	case e.msg.Len() > 0:
		n, _ := e.msg.Read(p)
		if e.msg.Len() == 0 && e.msg.Cap() > keepMessageBuffer {
			e.msg = bytes.Buffer{}
		}
		return n, nil
	}
	n, err := meter{e.b, arrival{e.b}}.Read(p[:min(int64(len(p)), e.left)])
	e.left -= int64(n)
	if e.left == 0 {
		e.arrived()
	}
	if err == io.EOF && e.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// next reads the next message's prefix, and inflates it if compressed.
func (e *envelopes) next() error {
	b, in := e.b, arrival{e.b}
	// A stream's next message may be long in coming; once it starts, it
	// must arrive within the body timeout.
	if _, err := io.ReadFull(in, e.pre[:1]); err != nil {
		return err // io.EOF: the body ends between messages
	}
	b.g.giveBack(b, false) // the last message was read and decoded
	b.decoded = 0
	if b.lim.stream {
		b.setDeadline()
	}
	if _, err := io.ReadFull(in, e.pre[1:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	size := int64(binary.BigEndian.Uint32(e.pre[1:]))
	if b.lim.max > 0 && size > b.lim.max {
		return b.refuse("max_request_bytes", b.lim.tooLarge(size))
	}
	e.head = e.pre[:]
	if e.pre[0]&flagCompressed == 0 || !e.gzip || size == 0 {
		e.left = size
		if size == 0 {
			e.arrived()
		}
		return nil
	}
	lr := &io.LimitedReader{R: in, N: size}
	e.f.reset(lr)
	if _, err := e.msg.ReadFrom(meter{b, &e.f}); err != nil {
		return err
	}
	if lr.N > 0 { // the body ended inside the message
		return io.ErrUnexpectedEOF
	}
	if e.msg.Len() > math.MaxUint32 { // only without a limit
		return b.refuse("max_request_bytes", b.lim.tooLarge(int64(e.msg.Len())))
	}
	e.arrived()
	e.pre[0] &^= flagCompressed
	binary.BigEndian.PutUint32(e.pre[1:], uint32(e.msg.Len()))
	return nil
}

// arrived lifts a stream's deadline: its message came whole.
func (e *envelopes) arrived() {
	if e.b.lim.stream {
		e.b.liftDeadline()
	}
}
