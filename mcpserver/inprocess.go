package mcpserver

import (
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
)

// handlerTransport is an http.RoundTripper that serves each request with an
// http.Handler in this process: the request never touches a socket, yet it
// passes through exactly the code (authentication, visibility, validation,
// error contract) a request over the network does. Responses stream: the
// RoundTrip returns as soon as the handler writes its header, and the body
// is read while the handler still writes it (live event streams).
type handlerTransport struct {
	h      http.Handler
	logger *slog.Logger
}

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	// The handler gets its own copy: a server request has no URL scheme or
	// host of its own, and RequestURI is what a server would have read.
	in := req.Clone(req.Context())
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "in-process"
	if in.Body == nil {
		in.Body = http.NoBody
	}
	go func() {
		// A panicking handler must not take the process down (net/http
		// would have recovered it too): the caller sees a 500, or a body
		// cut short if the header was already sent.
		defer func() {
			if p := recover(); p != nil {
				t.logger.Error("in-process request panicked", "method", in.Method, "path", in.URL.Path, "panic", p, "stack", string(debug.Stack()))
				w.WriteHeader(http.StatusInternalServerError)
				pw.CloseWithError(io.ErrUnexpectedEOF)
			}
		}()
		t.h.ServeHTTP(w, in)
		w.WriteHeader(http.StatusOK) // a handler that wrote nothing answered 200
		pw.Close()
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pw.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	resp := &http.Response{
		Status:        http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          pr,
		ContentLength: -1,
		Request:       req,
	}
	return resp, nil
}

// pipeWriter is the handler's side of handlerTransport.
type pipeWriter struct {
	header http.Header
	sent   http.Header // the header as it was when written
	pw     *io.PipeWriter
	once   sync.Once
	status int
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.status = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush is a no-op: every Write already reaches the reader, but handlers
// that stream ask for a Flusher.
func (w *pipeWriter) Flush() { w.WriteHeader(http.StatusOK) }
