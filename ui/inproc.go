package ui

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// inProcess is a connect.HTTPClient that hands each request straight to
// the node's own API handler: no socket, no TLS, no second login, and the
// API's interceptors (roles, forwarding to the leader, error mapping) run
// as for any client. The response body is a pipe, so streams (watches)
// work too.
type inProcess struct{ api http.Handler }

func (c inProcess) Do(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.RemoteAddr = "127.0.0.1:0" // the dashboard itself, on this node
	req.RequestURI = req.URL.RequestURI()
	if req.Body == nil {
		req.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: pw, sent: make(chan struct{})}
	go func() {
		defer func() {
			// As net/http would, a panicking handler (http.ErrAbortHandler
			// included) cuts its call short, not the process.
			if p := recover(); p != nil {
				w.WriteHeader(http.StatusInternalServerError)
				pw.CloseWithError(fmt.Errorf("the API handler panicked: %v", p))
				return
			}
			w.WriteHeader(http.StatusOK) // a handler that wrote nothing
			pw.Close()
		}()
		c.api.ServeHTTP(w, req)
	}()
	select {
	case <-w.sent:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	stop := context.AfterFunc(req.Context(), func() { pr.CloseWithError(req.Context().Err()) })
	return &http.Response{
		Status: http.StatusText(w.status), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sentHeader, Body: &stopOnClose{ReadCloser: pr, stop: stop}, ContentLength: -1, Request: req,
	}, nil
}

// pipeWriter is the http.ResponseWriter of an in-process call.
type pipeWriter struct {
	header     http.Header
	sentHeader http.Header
	status     int
	body       *io.PipeWriter
	once       sync.Once
	sent       chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.status, w.sentHeader = code, w.header.Clone()
		close(w.sent)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// Flush sends the header: a stream's first message may be a while.
func (w *pipeWriter) Flush() { w.WriteHeader(http.StatusOK) }

type stopOnClose struct {
	io.ReadCloser
	stop func() bool
}

func (b *stopOnClose) Close() error {
	b.stop()
	return b.ReadCloser.Close()
}
