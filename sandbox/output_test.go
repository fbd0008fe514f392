package sandbox

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCapture(t *testing.T) {
	for _, limit := range []int{1, 2, 10, 101, 4096} {
		for _, total := range []int{0, 1, limit - 1, limit, limit + 1, 3*limit + 7, 20 * limit} {
			if total < 0 {
				continue
			}
			data := make([]byte, total)
			for i := range data {
				data[i] = 'a' + byte(i%26)
			}
			c := newCapture(limit)
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 1+rand.IntN(2*limit+3))
				c.write(rest[:n])
				rest = rest[n:]
			}
			got, trunc := c.result()
			if total <= limit {
				if trunc || got != string(data) {
					t.Errorf("limit %d, total %d: got %q (truncated %v), want everything", limit, total, got, trunc)
				}
				continue
			}
			head, tail := string(data[:limit/2]), string(data[total-(limit-limit/2):])
			want := head + fmt.Sprintf("\n[… %d bytes omitted …]\n", total-limit) + tail
			if !trunc || got != want {
				t.Errorf("limit %d, total %d: got %q, want %q", limit, total, got, want)
			}
		}
	}

	// A cut inside a multi-byte character drops the fragment.
	c := newCapture(8)
	c.write([]byte("ab€" + strings.Repeat("-", 20) + "€cd"))
	got, _ := c.result()
	if !strings.HasPrefix(got, "ab\n[…") || !strings.HasSuffix(got, "…]\ncd") {
		t.Errorf("utf-8 cut: %q", got)
	}
}
