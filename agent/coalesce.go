package agent

import (
	"strings"
	"sync"
	"time"
)

// coalescer gathers small pieces of streamed text and hands them on at
// most every interval, so a fast stream costs a few events a second, not
// one per token.
type coalescer struct {
	mu    sync.Mutex
	buf   strings.Builder
	last  time.Time
	every time.Duration
	out   func(string)
}

func newCoalescer(every time.Duration, out func(string)) *coalescer {
	return &coalescer{every: every, out: out}
}

func (c *coalescer) add(s string) {
	c.mu.Lock()
	c.buf.WriteString(s)
	if time.Since(c.last) < c.every {
		c.mu.Unlock()
		return
	}
	text := c.buf.String()
	c.buf.Reset()
	c.last = time.Now()
	c.mu.Unlock()
	c.out(text)
}

func (c *coalescer) flush() {
	c.mu.Lock()
	text := c.buf.String()
	c.buf.Reset()
	c.last = time.Now()
	c.mu.Unlock()
	if text != "" {
		c.out(text)
	}
}
