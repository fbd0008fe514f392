// Package providertest replays recorded model-API exchanges from an
// httptest server, so adapters (and anything built on them) can be tested
// against the exact bytes a provider streams, without a network or a key.
//
// An exchange is recorded as a raw HTTP response file: status line,
// headers, blank line, body (for streaming calls, the server-sent events
// exactly as the API sends them). The server answers the n-th request with
// the n-th exchange, and keeps answering with the last one; it records
// every request it received, so a test can check the body the adapter
// sent.
package providertest

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
)

// Exchange is one recorded response.
type Exchange struct {
	Status int
	Header http.Header
	Body   []byte
	// PauseAfter, when positive, holds the body after that many events
	// until Resume is closed, or forever when Resume is nil; either way the
	// hold ends when the client goes away. It lets a test see events
	// arrive before the stream ends, and cancel a call mid-stream.
	PauseAfter int
	Resume     <-chan struct{}
}

// Load reads a recorded exchange from a raw HTTP response file.
func Load(t testing.TB, path string) Exchange {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("load exchange: %v", err)
	}
	res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("load exchange %s: %v", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("load exchange %s: %v", path, err)
	}
	return Exchange{Status: res.StatusCode, Header: res.Header, Body: body}
}

// Request is a request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Server serves exchanges in order.
type Server struct {
	URL string

	mu        sync.Mutex
	exchanges []Exchange
	requests  []Request
}

// NewServer starts a server (closed when the test ends) that answers with
// the given exchanges in order, repeating the last.
func NewServer(t testing.TB, exchanges ...Exchange) *Server {
	t.Helper()
	if len(exchanges) == 0 {
		t.Fatal("providertest: no exchanges")
	}
	s := &Server{exchanges: exchanges}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	ex := s.exchanges[min(n, len(s.exchanges)-1)]
	s.mu.Unlock()

	for k, vs := range ex.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(ex.Status)
	flusher, _ := w.(http.Flusher)
	for i, event := range splitEvents(ex.Body) {
		if ex.PauseAfter > 0 && i == ex.PauseAfter {
			select {
			case <-ex.Resume:
			case <-r.Context().Done():
				return
			}
		}
		if _, err := w.Write(event); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// splitEvents cuts an event-stream body after each blank line, keeping the
// bytes exactly; a body that is not an event stream is one piece.
func splitEvents(body []byte) [][]byte {
	var out [][]byte
	for len(body) > 0 {
		i := bytes.Index(body, []byte("\n\n"))
		if i < 0 {
			out = append(out, body)
			break
		}
		out = append(out, body[:i+2])
		body = body[i+2:]
	}
	return out
}
