package acp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/desk-runtime/desk/runtimehost/wire"
)

// stdoutGuard passes the agent's stdout to the SDK line by line and ends
// it at the first line that is not a JSON object. The SDK logs and skips
// a line it cannot parse, so a child that prints something else (a wrong
// argv, a banner, a shell) would leave every request waiting forever;
// ended, the connection fails its requests and the error names the line.
// It also ends it at a line longer than max (wire.LineTooLong), holding
// no more than max bytes of it.
type stdoutGuard struct {
	r       *bufio.Reader
	max     int
	pending []byte

	mu  sync.Mutex
	bad error

	// ready is closed once the connection is set up (its logger
	// installed): the SDK's receive loop starts in NewConnection and
	// reads the logger when it ends, while SetLogger writes it without a
	// lock; holding the first read until then orders the two.
	ready chan struct{}
}

// sdkMaxLine is the ACP Go SDK's own bound of one line (its scanner's
// buffer, acp-go-sdk connection.go): a longer line ends its receive loop
// with nothing but "peer disconnected", so the guard's bound is never
// above it.
const sdkMaxLine = 10 << 20

func newStdoutGuard(r io.Reader, max int) *stdoutGuard {
	max = min(max, sdkMaxLine)
	return &stdoutGuard{r: bufio.NewReaderSize(r, min(64<<10, max)), max: max, ready: make(chan struct{})}
}

func (g *stdoutGuard) Read(p []byte) (int, error) {
	<-g.ready
	if len(g.pending) == 0 {
		line, err := g.line()
		if err != nil && errors.Is(err, wire.ErrLineTooLong) {
			g.mu.Lock()
			g.bad = err
			g.mu.Unlock()
			return 0, err
		}
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '{' {
			if len(t) > 200 {
				t = append(t[:200:200], "…"...)
			}
			g.mu.Lock()
			g.bad = fmt.Errorf("the agent's stdout is not ACP JSON-RPC (a line %q)", t)
			g.mu.Unlock()
			return 0, g.bad
		}
		if len(line) == 0 {
			return 0, err
		}
		g.pending = line
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

// line reads the next line, its newline included, refusing one longer
// than g.max as soon as it is.
func (g *stdoutGuard) line() ([]byte, error) {
	var line []byte
	for {
		frag, err := g.r.ReadSlice('\n')
		if len(line)+len(frag) > g.max {
			return nil, wire.LineTooLong(g.max)
		}
		if n := len(line) + len(frag); n > cap(line) {
			// Doubling, as bufio.Scanner grows: append's growth of large
			// slices is slower, and its copies would add up to several
			// times the bound.
			grown := make([]byte, len(line), min(max(2*cap(line), n), g.max))
			copy(grown, line)
			line = grown
		}
		line = append(line, frag...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// cause is the garbage error when stdout ended on one, else err: the
// SDK's own error of a request cut off by it says only that the peer
// disconnected.
func (g *stdoutGuard) cause(err error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bad != nil && err != nil {
		return fmt.Errorf("%w (%v)", g.bad, err)
	}
	return err
}
