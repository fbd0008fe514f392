package sandbox

import (
	"fmt"
	"os"
	"sync"
	"unicode/utf8"
)

// capture keeps the first and last bytes of a stream within a fixed
// budget: up to limit/2 bytes of head, and the last limit-limit/2 bytes
// after it. The tail buffer may grow to twice its budget before it is
// compacted, so keeping a tail costs amortized constant time per byte.
type capture struct {
	limit int
	head  []byte
	tail  []byte
	total int64
}

func newCapture(limit int) *capture { return &capture{limit: limit} }

func (c *capture) headCap() int { return c.limit / 2 }
func (c *capture) tailCap() int { return c.limit - c.limit/2 }

func (c *capture) write(p []byte) {
	c.total += int64(len(p))
	if n := c.headCap() - len(c.head); n > 0 {
		k := min(n, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return
	}
	tc := c.tailCap()
	if len(p) >= tc {
		c.tail = append(c.tail[:0], p[len(p)-tc:]...)
		return
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*tc {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-tc:]...)
	}
}

// result returns the kept text and whether bytes were omitted. A truncated
// stream is its head and tail, cut at UTF-8 boundaries where the cut would
// split a character, around a line saying how many bytes are missing.
func (c *capture) result() (string, bool) {
	tail := c.tail
	if len(tail) > c.tailCap() {
		tail = tail[len(tail)-c.tailCap():]
	}
	kept := int64(len(c.head) + len(tail))
	if kept == c.total {
		return string(c.head) + string(tail), false
	}
	head := trimIncompleteRune(c.head)
	for i := 0; i < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	omitted := c.total - int64(len(head)) - int64(len(tail))
	return string(head) + fmt.Sprintf("\n[… %d bytes omitted …]\n", omitted) + string(tail), true
}

// trimIncompleteRune drops a UTF-8 sequence cut short at the end of b.
func trimIncompleteRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// outputBudget is what is left of the output limit, shared by both
// streams. Bytes past it are counted (in the captures) but not handed on,
// and the command is stopped.
type outputBudget struct {
	mu   sync.Mutex
	left int64
	stop *stopper
}

// take reserves up to n bytes and returns how many may be handed on.
func (b *outputBudget) take(n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := int(min(int64(n), b.left))
	b.left -= int64(k)
	if k < n {
		b.stop.stop(LimitOutput)
	}
	return k
}

// pump reads one stream until EOF or until r is closed, keeping it in c
// and handing each chunk to onOutput while the output limit lasts. Chunks are delivered only once gate
// says the command has started (bytes before that are the sandbox's own
// messages); when gate says it never started they are dropped.
func pump(r *os.File, stream string, c *capture, gate *startGate, budget *outputBudget, onOutput OutputFunc) {
	buf := make([]byte, 4096)
	decided := false
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if !decided {
				decided = true
				if !gate.wait() {
					// The sandbox never started the command: what came
					// here is the sandbox's own error, kept apart.
					gate.setupOutput(stream, buf[:n])
					drainSetup(r, stream, gate, buf)
					return
				}
			}
			c.write(buf[:n])
			if k := budget.take(n); k > 0 && onOutput != nil {
				chunk := make([]byte, k)
				copy(chunk, buf[:k])
				onOutput(stream, chunk)
			}
		}
		if err != nil {
			return
		}
	}
}

func drainSetup(r *os.File, stream string, gate *startGate, buf []byte) {
	for {
		n, err := r.Read(buf)
		if n > 0 {
			gate.setupOutput(stream, buf[:n])
		}
		if err != nil {
			return
		}
	}
}
