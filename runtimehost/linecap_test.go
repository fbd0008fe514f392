package runtimehost_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk/runtimehost/acp"
	"github.com/desk-runtime/desk/runtimehost/claude"
	"github.com/desk-runtime/desk/runtimehost/codex"
	"github.com/desk-runtime/desk/runtimehost/wire"
)

// longLine is a child's stdout that prints one JSON-looking line of n
// bytes, made up as it is read (the test itself holds none of it).
type longLine struct{ n, off int }

func (l *longLine) Read(p []byte) (int, error) {
	const head = `{"jsonrpc":"2.0","type":"stream_event","id":1,"pad":"`
	if l.off >= l.n {
		return 0, io.EOF
	}
	i := 0
	for ; i < len(p) && l.off < l.n; i, l.off = i+1, l.off+1 {
		switch {
		case l.off < len(head):
			p[i] = head[l.off]
		case l.off == l.n-1:
			p[i] = '\n'
		default:
			p[i] = 'a'
		}
	}
	return i, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

// A 64 MiB line on a runtime's stdout ends the connection with an error
// naming the limit, and reading it allocates a bounded amount (about the
// limit, never the line): each transport, with the default limit. Not
// parallel: it measures the process's allocations.
func TestStdoutLineIsCapped(t *testing.T) {
	const line = 64 << 20
	for _, c := range []struct {
		name  string
		tr    wire.Transport
		limit int
	}{
		{"acp", acp.Transport{}, 10 << 20}, // the ACP SDK's own bound
		{"codex-app-server", codex.Transport{}, wire.DefaultMaxLine},
		{"claude-stream-json", claude.Transport{}, wire.DefaultMaxLine},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			conn, err := c.tr.Attach(ctx, wire.Stdio{Stdin: discard{}, Stdout: &longLine{n: line}}, wire.Options{})
			if err == nil {
				_, err = conn.Open(ctx, "")
				conn.Close()
			}
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: %v; allocated %d MiB reading a %d MiB line", c.name, err, alloc>>20, line>>20)
			if !errors.Is(err, wire.ErrLineTooLong) || !strings.Contains(err.Error(), "limit of "+wire.Size(c.limit)) {
				t.Fatalf("a %d MiB line: %v, want the error naming the limit of %s", line>>20, err, wire.Size(c.limit))
			}
			// The reader's buffer grows by doubling up to the limit: its
			// buffers add up to two or three times the limit (the largest
			// two alive at once), never to the line.
			if alloc > uint64(3*c.limit) || alloc >= line*3/4 {
				t.Fatalf("reading the line allocated %d MiB (limit %s)", alloc>>20, wire.Size(c.limit))
			}
		})
	}
}

// The host's MaxLineBytes reaches the transport: a smaller bound fails a
// shorter line, naming that bound.
func TestStdoutLineCapIsConfigurable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := codex.Transport{}.Attach(ctx, wire.Stdio{Stdin: discard{}, Stdout: &longLine{n: 3 << 20}}, wire.Options{MaxLine: 1 << 20})
	if err == nil {
		conn.Close()
	}
	if !errors.Is(err, wire.ErrLineTooLong) || !strings.Contains(err.Error(), "limit of 1 MiB") {
		t.Fatalf("a 3 MiB line with a 1 MiB limit: %v", err)
	}
}

// BenchmarkStdoutLongLine reads a 64 MiB line with the default limit on
// each transport and reports what reading it allocated (MiB/line): bound
// by the limit, never by the line.
func BenchmarkStdoutLongLine(b *testing.B) {
	const line = 64 << 20
	for _, c := range []struct {
		name string
		tr   wire.Transport
	}{{"acp", acp.Transport{}}, {"codex-app-server", codex.Transport{}}, {"claude-stream-json", claude.Transport{}}} {
		b.Run(c.name, func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				conn, err := c.tr.Attach(context.Background(), wire.Stdio{Stdin: discard{}, Stdout: &longLine{n: line}}, wire.Options{})
				if err == nil {
					_, err = conn.Open(context.Background(), "")
					conn.Close()
				}
				if !errors.Is(err, wire.ErrLineTooLong) {
					b.Fatalf("a %d MiB line: %v", line>>20, err)
				}
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/(1<<20), "MiB/line")
		})
	}
}
