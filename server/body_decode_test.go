package server

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
)

// testGuard is a body guard with its refusals counted by limit.
func testGuard(budget, perClient int64) (*bodyGuard, map[string]int) {
	refused := map[string]int{}
	g := &bodyGuard{budget: budget, perClient: perClient, byClient: map[string]int64{},
		refused: func(limit string) { refused[limit]++ }}
	return g, refused
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

// envelope frames msg as gRPC and Connect streams do.
func envelope(flags byte, msg []byte) []byte {
	out := []byte{flags, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

func header(contentType, encodingHeader, encoding string) http.Header {
	h := http.Header{"Content-Type": {contentType}}
	if encoding != "" {
		h.Set(encodingHeader, encoding)
	}
	return h
}

var (
	unaryGzip = header("application/json", "Content-Encoding", "gzip")
	unaryJSON = header("application/json", "", "")
	grpcGzip  = header("application/grpc+proto", "Grpc-Encoding", "gzip")
	webGzip   = header("application/grpc-web", "Grpc-Encoding", "gzip")
	// connect+json; charset: a parameter does not hide a stream.
	streamGzip = header("application/connect+json; charset=utf-8", "Connect-Content-Encoding", "gzip")
)

// The decoding limiter, case by case: what connect reads, what it costs,
// and what is refused with which limit.
func TestBodyDecoder(t *testing.T) {
	hello := []byte(`{"resource":"x"}`)
	words := bytes.Repeat([]byte("word "), 150) // 750 bytes, under the limit of 1000
	bomb := gz(t, make([]byte, 512<<10))        // 500 bytes of gzip
	bigBomb := bytes.Repeat(bomb, 32)           // 16 MiB in 16 KB: gzip members one after another
	var emptyMembers []byte
	for len(emptyMembers) < 4000 {
		emptyMembers = append(emptyMembers, gz(t, nil)...)
	}
	cases := []struct {
		name      string
		limit     int64 // 1000 if 0
		h         http.Header
		body      []byte
		perClient int64
		client    string
		want      []byte // what connect reads, if no error
		refused   string // the limit refused; "" for none
		code      connect.Code
		say       string // in the error
	}{
		{name: "plain", h: unaryJSON, body: hello, want: hello},
		{name: "plain past the limit", h: unaryJSON, body: make([]byte, 1001), refused: "max_request_bytes",
			code: connect.CodeResourceExhausted, say: "a request body may hold 1000 bytes once decoded (limit max_request_bytes); this one is larger than that"},
		{name: "gzip", h: unaryGzip, body: gz(t, words), want: words},
		{name: "gzip bomb", h: unaryGzip, body: bomb, refused: "max_request_bytes", code: connect.CodeResourceExhausted,
			say: "may hold 1000 bytes once decoded (limit max_request_bytes); this one is larger than that"},
		{name: "gzip bomb, cut off as it inflates", limit: 64 << 10, h: unaryGzip, body: bigBomb, refused: "max_request_bytes",
			code: connect.CodeResourceExhausted, say: "once decoded"},
		{name: "gzip that does not decode", h: unaryGzip, body: []byte("not gzip at all"),
			code: connect.CodeInvalidArgument, say: "compressed with gzip and does not decode"},
		{name: "gzip and garbage after", h: unaryGzip, body: append(gz(t, hello), "garbage"...),
			code: connect.CodeInvalidArgument, say: "does not decode"},
		{name: "gzip cut short", h: unaryGzip, body: gz(t, words)[:40], code: connect.CodeInvalidArgument, say: "unexpected EOF"},
		{name: "gzip that decodes to nothing, sent on", h: unaryGzip, body: emptyMembers, refused: "max_request_bytes",
			code: connect.CodeResourceExhausted, say: "may hold 1000 bytes"},
		{name: "another encoding passes for connect to refuse", h: header("application/json", "Content-Encoding", "br"), body: hello, want: hello},
		{name: "past the client's share", h: unaryJSON, body: words, perClient: 500, client: "192.0.2.1", refused: "max_inflight_body_bytes_per_client",
			code: connect.CodeResourceExhausted, say: "192.0.2.1 is already sending"},
		{name: "from another node: no share", h: unaryJSON, body: words, perClient: 500, want: words},

		{name: "messages", h: grpcGzip,
			body: bytes.Join([][]byte{envelope(0, hello), envelope(1, gz(t, words)), envelope(1, nil), envelope(0, nil)}, nil),
			want: bytes.Join([][]byte{envelope(0, hello), envelope(0, words), envelope(1, nil), envelope(0, nil)}, nil)},
		{name: "gRPC-Web messages", h: webGzip, body: envelope(1, gz(t, words)), want: envelope(0, words)},
		{name: "Connect stream messages", h: streamGzip, body: envelope(1, gz(t, words)), want: envelope(0, words)},
		{name: "a compressed message without gzip passes for connect to refuse", h: header("application/grpc", "", ""),
			body: envelope(1, gz(t, hello)), want: envelope(1, gz(t, hello))},
		{name: "a message bomb", h: grpcGzip, body: envelope(1, bomb), refused: "max_request_bytes",
			code: connect.CodeResourceExhausted, say: "may hold 1000 bytes once decoded (limit max_request_bytes); this one is larger than that"},
		{name: "a message that says it is too large", h: grpcGzip, body: envelope(0, make([]byte, 5000)), refused: "max_request_bytes",
			code: connect.CodeResourceExhausted, say: "this one is 5000 bytes"},
		{name: "a message of bad gzip", h: grpcGzip, body: envelope(1, []byte("nope")), code: connect.CodeInvalidArgument, say: "does not decode"},
		{name: "a prefix cut short", h: grpcGzip, body: envelope(0, hello)[:3], say: io.ErrUnexpectedEOF.Error()},
		{name: "a message cut short", h: grpcGzip, body: envelope(0, hello)[:10], say: io.ErrUnexpectedEOF.Error()},
		{name: "a compressed message cut short", h: grpcGzip, body: envelope(1, gz(t, words))[:5], say: io.ErrUnexpectedEOF.Error()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, refused := testGuard(1<<20, tc.perClient)
			limit := cmp.Or(tc.limit, 1000)
			b := g.newBody(bodyLimit{max: limit, name: "max_request_bytes"}, tc.h, io.NopCloser(bytes.NewReader(tc.body)), tc.client)
			got, err := io.ReadAll(b)
			switch {
			case tc.say == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.say == "" && !bytes.Equal(got, tc.want):
				t.Fatalf("read %q, want %q", trim(got), trim(tc.want))
			case tc.say != "" && (err == nil || !strings.Contains(err.Error(), tc.say)):
				t.Fatalf("error %v, want one saying %q", err, tc.say)
			case tc.code != 0 && connect.CodeOf(err) != tc.code:
				t.Fatalf("error %v, want code %v", err, tc.code)
			}
			wantRefused := map[string]int{}
			if tc.refused != "" {
				wantRefused[tc.refused] = 1
			}
			if !maps.Equal(refused, wantRefused) {
				t.Errorf("refusals %v, want %v", refused, wantRefused)
			}
			if tc.limit > 0 && b.raw > int64(len(tc.body))/2 {
				t.Errorf("read %d bytes of a %d-byte bomb to refuse it: it was not cut off as it inflated", b.raw, len(tc.body))
			}
			g.giveBack(b, true)
			if g.held != 0 || len(g.byClient) != 0 {
				t.Errorf("after the body: %d bytes held, by client %v", g.held, g.byClient)
			}
		})
	}
}

func trim(b []byte) []byte { return b[:min(len(b), 80)] }

// A stream's messages are charged one at a time: a message's bytes are
// given back when the next one starts, and a body given back for good
// takes no more.
func TestStreamChargedPerMessage(t *testing.T) {
	g, _ := testGuard(1<<20, 0)
	a, c := bytes.Repeat([]byte("a"), 300), bytes.Repeat([]byte("c"), 200)
	body := bytes.Join([][]byte{envelope(1, gz(t, a)), envelope(0, c)}, nil)
	b := g.newBody(bodyLimit{max: 1000, stream: true}, grpcGzip, io.NopCloser(bytes.NewReader(body)), "192.0.2.1")
	if _, err := io.ReadFull(b, make([]byte, 5+len(a))); err != nil {
		t.Fatal(err)
	}
	if g.held != int64(len(a)) {
		t.Fatalf("%d bytes held after the first message, want %d", g.held, len(a))
	}
	if _, err := io.ReadAll(b); err != nil {
		t.Fatal(err)
	}
	if g.held != int64(len(c)) {
		t.Fatalf("%d bytes held after the second message, want its %d", g.held, len(c))
	}
	g.giveBack(b, true)
	if _, err := g.charge(b, 1); err == nil || g.held != 0 {
		t.Fatalf("a body given back for good took more: %v, %d held", err, g.held)
	}
}

// FuzzBodyDecoder reads arbitrary bodies, as one message or as messages,
// plain or gzip: the guard never panics, never hands over a message past
// the limit, holds nothing once the body is given back, and what it hands
// over is what the body decodes to (checked with compress/gzip).
func FuzzBodyDecoder(f *testing.F) {
	words := bytes.Repeat([]byte("word "), 100)
	f.Add([]byte(`{"a":1}`), false, false, uint16(100))
	f.Add(gz(f, words), false, true, uint16(1000))
	f.Add(gz(f, words), false, true, uint16(100))
	f.Add(append(envelope(1, gz(f, words)), envelope(0, []byte("x"))...), true, true, uint16(1000))
	f.Add(envelope(1, gz(f, make([]byte, 1<<16))), true, true, uint16(1000))
	f.Add(append(gz(f, nil), gz(f, []byte("x"))...), false, true, uint16(10))
	f.Fuzz(func(t *testing.T, body []byte, enveloped, compressed bool, max uint16) {
		h := unaryJSON
		switch {
		case enveloped && compressed:
			h = grpcGzip
		case enveloped:
			h = header("application/grpc", "", "")
		case compressed:
			h = unaryGzip
		}
		limit := int64(max) + 1
		g, _ := testGuard(1<<20, 0)
		b := g.newBody(bodyLimit{max: limit, name: "max_request_bytes"}, h, io.NopCloser(bytes.NewReader(body)), "192.0.2.1")
		got, err := io.ReadAll(b)
		if g.held > g.budget {
			t.Fatalf("%d bytes held, over the budget", g.held)
		}
		g.giveBack(b, true)
		if g.held != 0 || len(g.byClient) != 0 {
			t.Fatalf("%d bytes held after the body was given back", g.held)
		}
		want, wantErr := reference(body, enveloped, compressed, limit)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("guard: %v; reference: %v", err, wantErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("guard read %q, reference %q", trim(got), trim(want))
		}
	})
}

// reference decodes body without the guard, all at once.
func reference(body []byte, enveloped, compressed bool, limit int64) ([]byte, error) {
	inflate := func(b []byte) ([]byte, error) {
		if len(b) == 0 {
			return b, nil // as connect: an empty body is an empty message
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		out, err := io.ReadAll(io.LimitReader(zr, limit+1))
		if err == nil && int64(len(out)) > limit {
			err = errors.New("past the limit")
		}
		return out, err
	}
	if !enveloped {
		if int64(len(body)) > limit {
			return nil, errors.New("past the limit")
		}
		if !compressed {
			return body, nil
		}
		return inflate(body)
	}
	var out []byte
	for len(body) > 0 {
		if len(body) < 5 {
			return nil, io.ErrUnexpectedEOF
		}
		flags, size := body[0], int64(binary.BigEndian.Uint32(body[1:5]))
		if size > limit {
			return nil, errors.New("past the limit")
		}
		if int64(len(body)-5) < size {
			return nil, io.ErrUnexpectedEOF
		}
		msg := body[5 : 5+size]
		body = body[5+size:]
		if flags&flagCompressed != 0 && compressed && size > 0 {
			var err error
			if msg, err = inflate(msg); err != nil {
				return nil, err
			}
			flags &^= flagCompressed
		}
		out = append(append(out, envelope(flags, msg)[:5]...), msg...)
	}
	return out, nil
}

// BenchmarkStreamMessages reads 100-byte messages of a stream through the
// guard, as connect reads a session's: the cost the guard adds to each.
func BenchmarkStreamMessages(b *testing.B) {
	one := envelope(0, make([]byte, 100))
	body := bytes.Repeat(one, b.N)
	g, _ := testGuard(1<<20, 1<<20)
	guarded := g.newBody(bodyLimit{max: 1000, stream: true}, grpcGzip, io.NopCloser(bytes.NewReader(body)), "192.0.2.1")
	msg := make([]byte, len(one))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := io.ReadFull(guarded, msg[:5]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(guarded, msg[5:]); err != nil {
			b.Fatal(err)
		}
	}
}

// deadlineWriter is a ResponseWriter that fails its test if a read
// deadline is set: HTTP/2's panics once its handler has returned.
type deadlineWriter struct {
	http.ResponseWriter
	t *testing.T
}

func (w deadlineWriter) SetReadDeadline(time.Time) error {
	w.t.Error("a read deadline was set after the handler returned")
	return nil
}

// A session's reader may still read a message the client sent before
// the handler returned: the guard refuses it without touching the gone
// ResponseWriter (a node crashed on it in faults.TestPartitions).
func TestBodyReadAfterTheHandlerReturnedSetsNoDeadline(t *testing.T) {
	g, _ := testGuard(1<<20, 0)
	msg := envelope(0, []byte("a message sent before the handler returned"))
	b := g.newBody(bodyLimit{max: 1 << 20, stream: true}, http.Header{"Content-Type": {"application/connect+proto"}},
		io.NopCloser(bytes.NewReader(msg)), "127.0.0.1")
	b.rc = http.NewResponseController(deadlineWriter{t: t})
	g.giveBack(b, true) // the handler returned
	if _, err := io.ReadAll(b); err == nil {
		t.Fatal("the body was read after the handler returned")
	}
	b.g.timeout = time.Second // the next message's deadline, and its lifting
	b.refusal = nil
	b.setDeadline()
	b.deadline = true
	b.liftDeadline()
}
