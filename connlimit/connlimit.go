// Package connlimit caps how many connections one client address may hold
// open at once, as a net.Listener wrapper, so that one client — a script
// on the same machine included — cannot take every connection the server
// is willing to serve. A connection past the cap is closed as soon as it
// is accepted, before a byte of it is read: refusing it costs the server
// nothing, whatever the client does next. (Answering 503 first was
// considered: the client's request is usually already in the socket, and
// closing a socket with unread data resets it, which can overtake the
// answer; so the answer would need a lingering read per refused
// connection — the very cost the cap is there to avoid.)
package connlimit

import (
	"io"
	"net"
	"sync"
	"time"
)

// DefaultMax is the cap when none is configured.
const DefaultMax = 64

// Listener is a net.Listener whose connections are counted per remote IP
// address (the port is not part of it, and loopback is counted like any
// other address).
type Listener struct {
	net.Listener
	max     int
	refused func(ip string, open int)

	mu   sync.Mutex
	open map[string]int
}

// New wraps ln. max is the cap per address: 0 means DefaultMax, a negative
// number no cap. refused, when not nil, is called for each refused
// connection with its address (call-site rate limiting is the caller's).
func New(ln net.Listener, max int, refused func(ip string, open int)) *Listener {
	if max == 0 {
		max = DefaultMax
	}
	return &Listener{Listener: ln, max: max, refused: refused, open: map[string]int{}}
}

// Accept returns the next connection whose address is under the cap,
// closing those that are not.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.max < 0 {
			return c, nil
		}
		ip := host(c.RemoteAddr())
		l.mu.Lock()
		n := l.open[ip]
		if n >= l.max {
			l.mu.Unlock()
			if tc, ok := c.(*net.TCPConn); ok {
				// Reset rather than the FIN handshake: nothing of this
				// connection is kept, not even its TIME_WAIT.
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			if l.refused != nil {
				l.refused(ip, n)
			}
			continue
		}
		l.open[ip] = n + 1
		l.mu.Unlock()
		return &conn{Conn: c, l: l, ip: ip}, nil
	}
}

// Open returns how many connections ip holds open now.
func (l *Listener) Open(ip string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[ip]
}

func (l *Listener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

func host(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return h
}

// conn gives its place back when it closes, once, however often Close is
// called (net/http and a hijacking handler may both close it).
type conn struct {
	net.Conn
	l    *Listener
	ip   string
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}

// CloseWrite and ReadFrom keep what net/http looks for on a *net.TCPConn:
// the half-close before a connection ends, and sendfile.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// RefusalLog returns a refused callback that calls log at most once per
// interval, with the number of connections refused since the last call,
// so that an attack does not flood the log.
func RefusalLog(interval time.Duration, log func(ip string, open int, refused int)) func(ip string, open int) {
	var mu sync.Mutex
	var last time.Time
	count := 0
	return func(ip string, open int) {
		mu.Lock()
		count++
		now := time.Now()
		if !last.IsZero() && now.Sub(last) < interval {
			mu.Unlock()
			return
		}
		last = now
		n := count
		count = 0
		mu.Unlock()
		log(ip, open, n)
	}
}
