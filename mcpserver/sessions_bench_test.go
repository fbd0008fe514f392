package mcpserver_test

import (
	"runtime"
	"testing"

	"github.com/desk-runtime/desk/app"
)

// BenchmarkMCPSessions opens b.N MCP sessions with one token on desk's
// real /mcp (in process, over loopback HTTP) with the per-token cap lifted,
// so every one stays open, and reports what one live session costs:
// heap bytes (HeapAlloc after GC), goroutine stack bytes and goroutines.
// The target is at most 64 KiB of heap a session:
//
//	go test -run '^$' -bench BenchmarkMCPSessions -benchtime 1000x ./mcpserver
func BenchmarkMCPSessions(b *testing.B) {
	w := newWorldWith(b, app.Config{MCPSessionsPerToken: 1 << 20})
	var before, after runtime.MemStats
	// One session first, so what every session shares (the server, its
	// schemas, the connection) is not counted.
	rawSession(b, w, w.tokA)
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	b.ResetTimer()
	for range b.N {
		rawSession(b, w, w.tokA)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := w.env.App.MCP.Sessions(); n != b.N+1 {
		b.Fatalf("%d sessions open, want %d", n, b.N+1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heap-B/session")
	b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/n, "stack-B/session")
	b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/session")
}
