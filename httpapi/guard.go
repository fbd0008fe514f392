package httpapi

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/desk-runtime/desk"
)

// BodyLimits bound how long a request body may take to arrive. Two rules
// hold together, both through the connection's read deadline:
//
//   - the idle rule: each window of Idle must bring bodyProgressBytes of
//     the body (or its end), so a stalled or trickled body ends early;
//   - the total rule: the whole body must have arrived Total after the
//     request began, plus one second per MinRate bytes of it (the declared
//     Content-Length, or for a chunked body the bytes received so far), so
//     a body that keeps trickling just fast enough for the idle rule still
//     ends, while a big upload on a real link always has time: with the
//     defaults, 1 GiB may take 2 minutes plus 1024 seconds (about 19
//     minutes, 0.9 MB/s), and arrives at 20 MB/s in under a minute.
//
// A body cut off by either rule answers 408 request_timeout, and the
// connection is closed.
type BodyLimits struct {
	Idle    time.Duration // 0: DefaultBodyIdleTimeout
	Total   time.Duration // 0: DefaultBodyTimeout
	MinRate int64         // bytes per second; 0: DefaultBodyMinRate
}

// DefaultBodyIdleTimeout is the window of the idle rule.
const DefaultBodyIdleTimeout = 30 * time.Second

// DefaultBodyTimeout is the base of the total rule.
const DefaultBodyTimeout = 2 * time.Minute

// DefaultBodyMinRate is the floor rate of the total rule: 1 MiB/s
// (8 Mbit/s), twenty times below the 20 MB/s a 1 GiB upload must be able
// to use, and far above a trickle.
const DefaultBodyMinRate = 1 << 20

// bodyProgressBytes is how much of a body each idle window must bring:
// 64 KiB in 30 s is 2 KiB/s, far below any real link.
const bodyProgressBytes = 64 << 10

func (l BodyLimits) resolved() BodyLimits {
	if l.Idle <= 0 {
		l.Idle = DefaultBodyIdleTimeout
	}
	if l.Total <= 0 {
		l.Total = DefaultBodyTimeout
	}
	if l.MinRate <= 0 {
		l.MinRate = DefaultBodyMinRate
	}
	return l
}

// allowance is the time the total rule grants for n bytes on top of Total.
func (l BodyLimits) allowance(n int64) time.Duration {
	secs := n / l.MinRate
	if secs > int64(30*24*time.Hour/time.Second) {
		secs = int64(30 * 24 * time.Hour / time.Second) // no overflow for absurd lengths
	}
	return time.Duration(secs)*time.Second + time.Duration(n%l.MinRate)*time.Second/time.Duration(l.MinRate)
}

// Guard wraps desk's whole HTTP handler (API, web UI and MCP) with the
// rules every request body is held to:
//
//   - every body has the read deadlines of BodyLimits;
//   - a response that begins before its request's body was read to the
//     end — a refusal (401, 404, 405, 413, …) that never looked at the
//     body, or any answer that did not need it — is sent at once and
//     closes the connection: it sets "Connection: close", so net/http
//     does not wait for the body before answering, and cuts the read
//     deadline to refusalLinger after the answer. An unauthenticated
//     client can therefore hold a connection only for the header timeout
//     and half a second, never for the time its body takes.
func Guard(h http.Handler, l BodyLimits) http.Handler {
	l = l.resolved()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		b := newBodyWatch(r.Body, http.NewResponseController(w).SetReadDeadline, w.Header(), l, r.ContentLength)
		// A copy of the request carries the watched body: net/http looks
		// at its own request's body after the handler (to close a
		// connection whose body was left unread gracefully), so that one
		// must stay as it was.
		r = r.WithContext(context.WithValue(r.Context(), watchKey{}, b))
		r.Body = struct {
			io.Reader
			io.Closer
		}{b, r.Body}
		g := &guardWriter{ResponseWriter: w, b: b}
		h.ServeHTTP(g, r)
		if !g.hijacked && !g.wrote {
			// net/http would answer 200 itself, after waiting for the
			// body; answer through the guard instead.
			g.WriteHeader(http.StatusOK)
		}
		b.stop()
	})
}

type watchKey struct{}

// bodyWatch enforces BodyLimits on one request body through the
// connection's read deadline (http.ResponseController, or the conn itself
// once a handler hijacked it). When a deadline passes, the read fails with
// a request_timeout error, and the deadline is left expired so that
// net/http does not wait for the rest of the body before answering: it
// answers and closes the connection.
type bodyWatch struct {
	body     io.Reader
	set      func(time.Time) error
	header   http.Header // nil once hijacked
	lim      BodyLimits
	start    time.Time
	length   int64 // the declared length, or -1 (chunked)
	read     int64 // bytes read so far
	since    int64 // bytes since the idle window began
	deadline bool  // a deadline is set on the connection
	eof      bool
	cut      bool // the body timed out, or the answer began before its end
}

func newBodyWatch(body io.Reader, set func(time.Time) error, header http.Header, l BodyLimits, length int64) *bodyWatch {
	b := &bodyWatch{body: body, set: set, header: header, lim: l, start: time.Now(), length: length}
	// A writer that does not support deadlines (a test recorder, MCP's
	// in-process requests) simply goes without.
	b.deadline = b.arm() == nil
	return b
}

// total is the instant the whole body must have arrived by.
func (b *bodyWatch) total() time.Time {
	n := b.length
	if n < 0 {
		n = b.read
	}
	return b.start.Add(b.lim.Total + b.lim.allowance(n))
}

// arm sets the read deadline to the nearer of the idle window's end and
// the total deadline.
func (b *bodyWatch) arm() error {
	d := time.Now().Add(b.lim.Idle)
	if t := b.total(); t.Before(d) {
		d = t
	}
	return b.set(d)
}

func (b *bodyWatch) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.read += int64(n)
	b.since += int64(n)
	if b.deadline && b.since >= bodyProgressBytes && err == nil {
		b.since = 0
		_ = b.arm()
	}
	if errors.Is(err, io.EOF) {
		b.eof = true
		if b.deadline {
			// Once the body is read, net/http reads the connection in the
			// background to notice a client going away; a deadline left
			// in place would end that read and cancel a handler that is
			// still working.
			b.deadline = false
			_ = b.set(time.Time{})
		}
	}
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		b.cut = true
		if b.header != nil {
			b.header.Set("Connection", "close")
		}
		if !time.Now().Before(b.total()) {
			return n, desk.Errorf(desk.ETIMEOUT, "the request body did not arrive within its deadline of %s (%s, plus a second per %d bytes); the request was cut off",
				b.total().Sub(b.start).Round(time.Millisecond), b.lim.Total, b.lim.MinRate)
		}
		return n, desk.Errorf(desk.ETIMEOUT, "the request body stalled: fewer than %d bytes arrived in %s; the request was cut off", bodyProgressBytes, b.lim.Idle)
	}
	return n, err
}

// refusalLinger is how long, after answering a request whose body it
// never read, desk still discards what the client sends before closing:
// closing a socket with unread data resets it, and a reset can reach the
// client before it read the answer. net/http lingers as long (its
// rstAvoidanceDelay) for bodies it gives up on.
const refusalLinger = 500 * time.Millisecond

// answered is called as the response begins: a body not read to its end
// by then is never used. The connection closes after the answer
// ("Connection: close" also stops net/http from reading the body before
// it answers), and the read deadline is cut to refusalLinger, so that
// what net/http discards of the body after the answer takes no longer.
func (b *bodyWatch) answered() {
	if b.eof || b.cut || b.header == nil {
		return
	}
	b.cut = true
	b.header.Set("Connection", "close")
	_ = b.set(time.Now().Add(refusalLinger))
}

// stop clears the deadline, so the connection serves its next request,
// unless the body was cut off.
func (b *bodyWatch) stop() {
	if b.deadline && !b.cut {
		_ = b.set(time.Time{})
	}
}

// guardWriter tells the body's watch when the response begins. It passes
// through everything the handlers use of the writer: Flush, Hijack,
// ReadFrom (sendfile) and Unwrap (http.ResponseController).
type guardWriter struct {
	http.ResponseWriter
	b        *bodyWatch
	wrote    bool
	hijacked bool
}

func (g *guardWriter) WriteHeader(code int) {
	if !g.wrote && code >= 200 {
		g.wrote = true
		g.b.answered()
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *guardWriter) Write(p []byte) (int, error) {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	return g.ResponseWriter.Write(p)
}

func (g *guardWriter) ReadFrom(src io.Reader) (int64, error) {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	if rf, ok := g.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(struct{ io.Writer }{g.ResponseWriter}, src)
}

func (g *guardWriter) Flush() {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(g.ResponseWriter).Flush()
}

func (g *guardWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(g.ResponseWriter).Hijack()
	if err == nil {
		g.hijacked = true
		g.b.header = nil
	}
	return conn, rw, err
}

func (g *guardWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// watchConn carries the watch of r's body over to a body read straight
// from the hijacked connection: the same start and limits, with the
// deadline now set on the connection itself.
func watchConn(r *http.Request, conn net.Conn, body io.Reader) io.Reader {
	b, _ := r.Context().Value(watchKey{}).(*bodyWatch)
	if b == nil {
		return body // no guard (a test's bare handler)
	}
	c := &bodyWatch{body: body, set: conn.SetReadDeadline, lim: b.lim, start: b.start, length: b.length, read: b.read}
	c.deadline = c.arm() == nil
	return c
}
