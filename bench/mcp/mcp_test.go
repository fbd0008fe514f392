// Package mcp benchmarks what MCP sessions cost desk: one agent actor token
// opens 1,000 sessions at /mcp (initialize, then notifications/initialized,
// as a host does) against the real desk binary, run as a child process so
// its memory is measured alone, and the server's resident memory growth is
// reported (VmRSS and VmHWM from /proc, after minus before).
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/mcp
//
// Cases: Capped is desk as configured by default (at most 32 sessions a
// token: the 1,000 evict one another); Uncapped lifts the cap
// (DESK_MCP_SESSIONS_PER_TOKEN) so all 1,000 stay open, which is what one
// live session costs. BENCH_DESK_BEFORE names another desk binary (say,
// built from main) to measure beside them in the same run. BENCH_SESSIONS
// changes the 1,000. The target: desk's RSS grows less than 64 MiB in
// Capped and in Uncapped.
package mcp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk/client"
)

const mib = 1 << 20

var (
	binDir  string
	deskBin string
)

func TestMain(m *testing.M) {
	var err error
	binDir, err = os.MkdirTemp("", "desk-bench-mcp-")
	if err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

var buildOnce sync.Once

// desk builds this tree's desk binary once per test process.
func desk(tb testing.TB) string {
	buildOnce.Do(func() {
		deskBin = filepath.Join(binDir, "desk")
		cmd := exec.Command("go", "build", "-o", deskBin, "github.com/desk-runtime/desk/cmd/desk")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			deskBin = ""
		}
	})
	if deskBin == "" {
		tb.Fatal("building desk failed")
	}
	return deskBin
}

var urlLine = regexp.MustCompile(`url=(http://[0-9.:]+)`)

// server is a desk child process and an agent actor's token on it.
type server struct {
	url, token string
	pid        int
}

func start(tb testing.TB, bin string, env ...string) *server {
	tb.Helper()
	const admin = "bench-admin-token"
	cmd := exec.Command(bin, "serve", "--home", tb.TempDir(), "--addr", "127.0.0.1:0")
	cmd.Env = append(append(os.Environ(), "DESK_ADMIN_TOKEN="+admin, "DESK_LOG_LEVEL=info"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	s := &server{pid: cmd.Process.Pid}
	select {
	case s.url = <-found:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		tb.Fatal("desk did not start")
	}
	tb.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	ctx := context.Background()
	c, err := client.New(s.url, admin)
	if err != nil {
		tb.Fatal(err)
	}
	ws, err := c.CreateWorkspace(ctx, "bench-mcp")
	if err != nil {
		tb.Fatal(err)
	}
	if _, s.token, err = c.CreateActor(ctx, ws.ID, "host", "agent"); err != nil {
		tb.Fatal(err)
	}
	return s
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`

func (s *server) post(tb testing.TB, sid, body string) (int, string) {
	req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// open opens one MCP session as a host does.
func (s *server) open(tb testing.TB) {
	code, sid := s.post(tb, "", initialize)
	if code != 200 || sid == "" {
		tb.Fatalf("initialize: %d", code)
	}
	if code, _ := s.post(tb, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != 202 {
		tb.Fatalf("initialized: %d", code)
	}
}

func procStatus(tb testing.TB, pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n * 1024
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

func sessions() int {
	if v, err := strconv.Atoi(os.Getenv("BENCH_SESSIONS")); err == nil && v > 0 {
		return v
	}
	return 1000
}

func BenchmarkMCPSessions(b *testing.B) {
	type tc struct {
		name, bin string
		env       []string
		target    bool
	}
	cases := []tc{
		{name: "Capped", bin: desk(b), target: true},
		{name: "Uncapped", bin: desk(b), env: []string{"DESK_MCP_SESSIONS_PER_TOKEN=1000000"}, target: true},
	}
	if before := os.Getenv("BENCH_DESK_BEFORE"); before != "" {
		cases = append(cases, tc{name: "Before", bin: before})
	}
	n := sessions()
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				s := start(b, c.bin, c.env...)
				s.open(b) // what every session shares is built by now
				rss0 := procStatus(b, s.pid, "VmRSS:")
				hwm0 := procStatus(b, s.pid, "VmHWM:")
				t0 := time.Now()
				for range n {
					s.open(b)
				}
				el := time.Since(t0)
				rss := procStatus(b, s.pid, "VmRSS:") - rss0
				hwm := procStatus(b, s.pid, "VmHWM:") - hwm0
				b.ReportMetric(float64(rss)/mib, "RSS-growth-MiB")
				b.ReportMetric(float64(hwm)/mib, "peak-RSS-growth-MiB")
				b.ReportMetric(float64(rss)/float64(n)/1024, "RSS-KiB/session")
				b.ReportMetric(float64(el.Microseconds())/float64(n), "µs/session")
				if c.target && rss >= 64*mib {
					b.Errorf("%d sessions grew desk's RSS by %.1f MiB: the target is under 64 MiB", n, float64(rss)/mib)
				}
			}
		})
	}
}
