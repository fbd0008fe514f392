package mcpserver_test

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/client"
	"github.com/desk-runtime/desk/mcpserver"
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

// statelessList is a 2026-07-28 tools/list: no session, the version and
// the client in _meta (and the version, method in headers).
const statelessList = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` +
	`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientCapabilities":{},` +
	`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`

// BenchmarkMCPStatelessRequests sends b.N 2026-07-28 requests (tools/list)
// to desk's real /mcp and reports what one costs while it runs
// (allocations) and what it leaves behind (heap bytes after GC, open
// sessions: none):
//
//	go test -run '^$' -bench BenchmarkMCPStatelessRequests -benchtime 2000x ./mcpserver
func BenchmarkMCPStatelessRequests(b *testing.B) {
	w := newWorldWith(b, app.Config{})
	h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/list"}}
	if r := rawPost(b, w.mcpURL, w.tokA, h, statelessList); r.StatusCode != 200 || !strings.Contains(string(r.Body), "session_send") {
		b.Fatalf("tools/list at 2026-07-28: %d %s", r.StatusCode, r.Body)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if r := rawPost(b, w.mcpURL, w.tokA, h, statelessList); r.StatusCode != 200 {
			b.Fatalf("tools/list: %d %s", r.StatusCode, r.Body)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := w.env.App.MCP.Sessions(); n != 0 {
		b.Fatalf("%d MCP sessions open after stateless requests, want 0", n)
	}
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "retained-heap-B/req")
}

// BenchmarkMCPSessionFlood is an attacker opening legacy (2025-06-18)
// sessions in a loop with one token at desk's default cap: the open
// sessions stay at the cap (the least recently used idle one is closed
// for each new one; idle ones expire after SessionTimeout, see
// TestIdleSessionsCloseAfterTenMinutes), so memory does not grow with
// b.N:
//
//	go test -run '^$' -bench BenchmarkMCPSessionFlood -benchtime 500x ./mcpserver
func BenchmarkMCPSessionFlood(b *testing.B) {
	w := newWorldWith(b, app.Config{})
	for range mcpserver.DefaultSessionsPerToken {
		rawSession(b, w, w.tokA)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		rawSession(b, w, w.tokA)
	}
	b.StopTimer()
	if n := w.env.App.MCP.Sessions(); n > mcpserver.DefaultSessionsPerToken {
		b.Fatalf("%d sessions open after %d opened, want at most %d", n, b.N, mcpserver.DefaultSessionsPerToken)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(w.env.App.MCP.Sessions()), "sessions-open")
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "heap-growth-B/session-opened")
}

// BenchmarkMCPTasks creates b.N tasks (2026-07-28 session_send with wait
// from a client declaring the Tasks extension) on desk's real /mcp and
// reports the heap they leave behind: a task holds nothing in desk's
// memory (its state is the queued message and its execution, in the
// store), so a flood of tasks grows the database's queue, not the heap.
//
//	go test -run '^$' -bench BenchmarkMCPTasks -benchtime 300x ./mcpserver
func BenchmarkMCPTasks(b *testing.B) {
	w := newWorldWith(b, app.Config{})
	ctx := context.Background()
	ses, err := w.clientA.CreateSession(ctx, w.ws, client.SessionCreate{Title: "tasks", Model: "script", Script: []byte(`{"steps":[{"text":"ok"}]}`)})
	if err != nil {
		b.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"session_send","arguments":{"session_id":"` + ses.ID +
		`","text":"x","wait":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"` + mcpserver.TasksExtension + `":{}}}}}}`
	h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"session_send"}}
	send := func() {
		if r := rawPost(b, w.mcpURL, w.tokA, h, body); r.StatusCode != 200 || !strings.Contains(string(r.Body), `"resultType":"task"`) {
			b.Fatalf("task: %d %q", r.StatusCode, r.Body)
		}
	}
	send()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		send()
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := w.env.App.MCP.Sessions(); n != 0 {
		b.Fatalf("%d MCP sessions open after task requests, want 0", n)
	}
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "retained-heap-B/task")
}
