package acp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sync"
)

// stdoutGuard passes the agent's stdout to the SDK line by line and ends
// it at the first line that is not a JSON object. The SDK logs and skips
// a line it cannot parse, so a child that prints something else (a wrong
// argv, a banner, a shell) would leave every request waiting forever;
// ended, the connection fails its requests and the error names the line.
type stdoutGuard struct {
	r       *bufio.Reader
	pending []byte

	mu  sync.Mutex
	bad error
}

func newStdoutGuard(r io.Reader) *stdoutGuard { return &stdoutGuard{r: bufio.NewReaderSize(r, 64<<10)} }

func (g *stdoutGuard) Read(p []byte) (int, error) {
	if len(g.pending) == 0 {
		line, err := g.r.ReadBytes('\n')
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
