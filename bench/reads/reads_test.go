// Package reads benchmarks desk's hot reads over HTTP against the
// reference the performance issue names: a bare net/http handler that
// answers the same JSON from memory, driven by the same load generator
// (32 keep-alive connections) in the same run:
//
//	go test -run '^$' -bench . -benchtime 5s ./bench/reads
//
// desk is the real binary (built once, or DESK_BENCH_BIN) serving an
// embedded SQLite home with one workspace, one session in a git checkout
// and a few messages; the reference is started in this process. Each
// benchmark reports req/s; BenchmarkGetSession also reports the ratio to
// the reference measured just before it (target ≥ 0.6).
package reads

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk/bench/internal/deskbin"
)

const conns = 32

// server is one desk serve with a workspace and a session.
type server struct {
	base, token, ses string
	body             []byte // GET /v1/sessions/{ses} as desk answered it
}

var (
	srvOnce sync.Once
	srv     *server
	srvErr  error
)

// start runs desk once for every benchmark of the package; it is killed
// when the test binary exits (Setpdeathsig is not portable; the process
// group is).
func start(b *testing.B) *server {
	srvOnce.Do(func() { srv, srvErr = launch(b) })
	if srvErr != nil {
		b.Fatal(srvErr)
	}
	return srv
}

func launch(b *testing.B) (*server, error) {
	d := deskbin.Path(b)
	home, err := os.MkdirTemp("", "desk-bench-reads-home-")
	if err != nil {
		return nil, err
	}
	addr := deskbin.FreeAddr(b)
	s := &server{base: "http://" + addr, token: "deskadm_benchreads0123456789"}
	cmd := exec.Command(d, "serve", "--addr", addr)
	cmd.Env = append(os.Environ(), "DESK_HOME="+home, "DESK_ADMIN_TOKEN="+s.token)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r, err := http.Get(s.base + "/healthz"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("desk did not answer /healthz in 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var ws struct{ ID string }
	if err := s.call("POST", "/v1/workspaces", `{"name":"bench-reads"}`, &ws); err != nil {
		return nil, err
	}
	// The session's checkout is a git repository, as most are: GET reads
	// its branch.
	co := filepath.Join(home, "workspaces", ws.ID, "checkout")
	if out, err := exec.Command("git", "init", "-q", "-b", "main", co).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("git init: %v: %s", err, out)
	}
	var ses struct{ ID string }
	if err := s.call("POST", "/v1/workspaces/"+ws.ID+"/sessions", `{"title":"bench","model":"script","script":{"steps":[{"text":"ok"}]}}`, &ses); err != nil {
		return nil, err
	}
	s.ses = ses.ID
	var raw json.RawMessage
	if err := s.call("GET", "/v1/sessions/"+s.ses, "", &raw); err != nil {
		return nil, err
	}
	s.body = raw
	return s, nil
}

func (s *server) call(method, path, body string, out any) error {
	req, _ := http.NewRequest(method, s.base+path, bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, r.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// load sends GET url from conns goroutines over keep-alive connections
// for d and returns completed requests per second. Every answer must be
// 200.
func load(b *testing.B, url, token string, d time.Duration) float64 {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	var n, bad atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			for time.Now().Before(stop) {
				r, err := c.Do(req)
				if err != nil {
					bad.Add(1)
					return
				}
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
				if r.StatusCode != 200 {
					bad.Add(1)
					return
				}
				n.Add(1)
			}
		})
	}
	start := time.Now()
	wg.Wait()
	if bad.Load() > 0 {
		b.Fatalf("%d requests failed", bad.Load())
	}
	return float64(n.Load()) / time.Since(start).Seconds()
}

// reference answers body from memory with the headers desk sends.
func reference(b *testing.B, body []byte) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.WriteHeader(401)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(body)
	})}
	go hs.Serve(l)
	b.Cleanup(func() { hs.Close() })
	return "http://" + l.Addr().String() + "/"
}

func window(b *testing.B) time.Duration {
	return 2 * time.Second
}

// BenchmarkGetSession measures GET /v1/sessions/{ses} on desk and the
// bare handler alternately (A B A B), reporting both and their ratio.
func BenchmarkGetSession(b *testing.B) {
	s := start(b)
	ref := reference(b, s.body)
	var deskRate, refRate float64
	rounds := 0
	for b.Loop() {
		refRate += load(b, ref, s.token, window(b))
		deskRate += load(b, s.base+"/v1/sessions/"+s.ses, s.token, window(b))
		rounds++
	}
	b.ReportMetric(deskRate/float64(rounds), "desk-req/s")
	b.ReportMetric(refRate/float64(rounds), "nethttp-req/s")
	b.ReportMetric(deskRate/refRate, "ratio")
}
