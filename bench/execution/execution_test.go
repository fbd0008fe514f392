// Package execution benchmarks desk's execution model on SQLite and, when
// DESK_TEST_POSTGRES is set, on Postgres:
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/execution
//
// It prints submit-to-start latency (p50, p99) with a no-op executor,
// throughput for 1,000 sessions × 10 messages, memory per idle session, and
// startup recovery time with 100,000 queued rows.
package execution

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
)

type backend struct {
	name string
	cfg  func(b *testing.B) app.Config
}

func backends() []backend {
	bs := []backend{
		{"sqlite", func(b *testing.B) app.Config { return app.Config{Home: b.TempDir()} }},
		{"sqlite-normal", func(b *testing.B) app.Config { return app.Config{Home: b.TempDir(), SQLiteSynchronous: "normal"} }},
	}
	if os.Getenv(pgtest.EnvVar) != "" {
		bs = append(bs, backend{"postgres", func(b *testing.B) app.Config { return app.Config{Home: b.TempDir(), Postgres: pgtest.DSN(b)} }})
	}
	return bs
}

var admin = desk.WithPrincipal(context.Background(), desk.Principal{Admin: true})

// noop starts and ends at once, recording when each queue item started.
type noop struct {
	mu      sync.Mutex
	started map[string]time.Time
	done    atomic.Int64
}

func (n *noop) Execute(ctx context.Context, t *execution.Turn) (*execution.Outcome, error) {
	now := time.Now()
	if err := t.Started(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.started[t.Item.ID] = now
	n.mu.Unlock()
	n.done.Add(1)
	return &execution.Outcome{}, nil
}

func open(b *testing.B, cfg app.Config, ex execution.Executor) *app.App {
	cfg.AdminToken = "bench"
	cfg.Executor = ex
	a, err := app.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(context.Background()) })
	return a
}

func sessions(b *testing.B, a *app.App, n int) []*desk.Session {
	w, err := a.Workspaces.CreateWorkspace(admin, desk.WorkspaceCreate{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	out := make([]*desk.Session, n)
	for i := range out {
		if out[i], err = a.Sessions.Create(admin, desk.SessionCreate{WorkspaceID: w.ID}); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// BenchmarkSubmitToStart measures, through the HTTP API, the time from
// sending a message to an idle surface to the executor starting it.
func BenchmarkSubmitToStart(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			ex := &noop{started: map[string]time.Time{}}
			a := open(b, be.cfg(b), ex)
			srv := httptest.NewServer(a.Handler)
			defer srv.Close()
			xs := sessions(b, a, 1)
			const n = 500
			lat := make([]time.Duration, 0, n)
			for i := range n {
				body, _ := json.Marshal(map[string]string{"text": fmt.Sprint(i)})
				req, _ := http.NewRequest("POST", srv.URL+"/v1/sessions/"+xs[0].ID+"/messages", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer bench")
				sent := time.Now()
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != 202 {
					b.Fatalf("submit: %v %v", err, resp)
				}
				var res desk.SubmitResult
				json.NewDecoder(resp.Body).Decode(&res)
				resp.Body.Close()
				for ex.done.Load() < int64(i+1) {
					time.Sleep(50 * time.Microsecond)
				}
				ex.mu.Lock()
				lat = append(lat, ex.started[res.Item.ID].Sub(sent))
				ex.mu.Unlock()
				// Wait for the settle so the next submit finds the surface idle.
				for {
					if x, _ := a.Store.ActiveExecution(admin, xs[0].SurfaceID); x == nil {
						break
					}
					time.Sleep(50 * time.Microsecond)
				}
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[n/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[n*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// BenchmarkThroughput submits 10 messages to each of 1,000 sessions from 16
// goroutines and waits until all 10,000 executions ended.
func BenchmarkThroughput(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			ex := &noop{started: map[string]time.Time{}}
			a := open(b, be.cfg(b), ex)
			xs := sessions(b, a, envInt("DESK_BENCH_SESSIONS", 1000))
			const per = 10
			start := time.Now()
			var wg sync.WaitGroup
			work := make(chan *desk.Session)
			for range 16 {
				wg.Go(func() {
					for x := range work {
						if _, err := a.Exec.Submit(admin, x.ID, desk.SubmitInput{Text: "m"}); err != nil {
							b.Error(err)
						}
					}
				})
			}
			for range per {
				for _, x := range xs {
					work <- x
				}
			}
			close(work)
			wg.Wait()
			for ex.done.Load() < int64(len(xs)*per) {
				time.Sleep(time.Millisecond)
			}
			// Wait for the last settles.
			for {
				act, _ := a.Store.ListActiveExecutions(admin)
				if len(act) == 0 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			el := time.Since(start)
			b.ReportMetric(float64(len(xs)*per)/el.Seconds(), "executions/s")
			b.ReportMetric(el.Seconds(), "total-s")
		})
	}
}

// BenchmarkIdleSessionMemory creates 5,000 idle sessions and reports the
// heap and goroutines each one costs the server (an idle surface has no
// dispatcher goroutine; its state lives in the store).
func BenchmarkIdleSessionMemory(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			a := open(b, be.cfg(b), &noop{started: map[string]time.Time{}})
			sessions(b, a, 10) // warm up pools and caches
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			g0 := runtime.NumGoroutine()
			const n = 5000
			xs := sessions(b, a, n)
			time.Sleep(300 * time.Millisecond) // a dispatcher sweep passes over them
			runtime.GC()
			runtime.ReadMemStats(&m1)
			g1 := runtime.NumGoroutine()
			b.ReportMetric(float64(int64(m1.HeapInuse)-int64(m0.HeapInuse))/n, "heap-bytes/session")
			b.ReportMetric(float64(g1-g0), "goroutines-added")
			runtime.KeepAlive(xs)
		})
	}
}

// BenchmarkRecovery100k measures startup with 100,000 queued rows on 1,000
// surfaces, 1,000 of them claimed by a dead desk process whose executions
// were running: the time app.Open takes to recover those executions and
// schedule dispatch, before it serves anything.
func BenchmarkRecovery100k(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			cfg := be.cfg(b)
			cfg.AdminToken = "bench"
			// Stage with a server that never polls for queued work, so
			// the rows inserted behind its back stay queued and the dead
			// owner's claims below find every surface idle.
			stage := cfg
			stage.Execution.PollInterval = time.Hour
			a, err := app.Open(context.Background(), stage)
			if err != nil {
				b.Fatal(err)
			}
			xs := sessions(b, a, 1000)
			db := a.Store.(interface{ SQL() *sql.DB }).SQL()
			q := `INSERT INTO queue_items (id, surface_id, session_id, workspace_id, kind, status, priority, position,
				origin, text, channel, conversation_id, created_at, updated_at)
				VALUES (?, ?, ?, ?, 'user_message', 'queued', 2, ?, ?, 'bench', 'http', ?, ?, ?)`
			if be.name == "postgres" {
				q = numbered(q)
			}
			tx, err := db.Begin()
			if err != nil {
				b.Fatal(err)
			}
			stmt, err := tx.Prepare(q)
			if err != nil {
				b.Fatal(err)
			}
			now := desk.Now().UnixMicro()
			for i := range 100_000 {
				x := xs[i%len(xs)]
				o, _ := json.Marshal(desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, Actor: "admin", Kind: desk.OriginUser})
				if _, err := stmt.Exec(desk.NewID(desk.PrefixQueue), x.SurfaceID, x.ID, x.WorkspaceID, i/len(xs)+1, string(o), x.ID, now, now); err != nil {
					b.Fatal(err)
				}
			}
			stmt.Close()
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			dead := &desk.Owner{ID: "own_dead", Host: "gone/boot", PID: 1, StartedAt: desk.Now().Add(-time.Hour), HeartbeatAt: desk.Now().Add(-time.Hour)}
			if err := a.Store.RegisterOwner(admin, dead); err != nil {
				b.Fatal(err)
			}
			for _, x := range xs {
				t := desk.Now()
				_, exe, err := a.Store.Claim(admin, desk.ClaimRequest{SurfaceID: x.SurfaceID, Owner: dead.ID, ExecutionID: desk.NewID(desk.PrefixExecution), Now: t, LeaseUntil: t.Add(time.Minute)})
				if err != nil || exe == nil {
					b.Fatalf("claim: %v", err)
				}
				if _, err := a.Store.MarkRunning(admin, exe.ID, dead.ID, t); err != nil {
					b.Fatal(err)
				}
			}
			a.Close(context.Background())

			// A gate keeps the recovered queues from draining while we time.
			gate := make(chan struct{})
			cfg.Executor = execution.ExecutorFunc(func(ctx context.Context, t *execution.Turn) (*execution.Outcome, error) {
				select {
				case <-gate:
				case <-ctx.Done():
				}
				return nil, ctx.Err()
			})
			start := time.Now()
			a, err = app.Open(context.Background(), cfg)
			el := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			act, _ := a.Store.ListActiveExecutions(admin)
			for _, x := range act {
				if x.Owner == dead.ID {
					b.Fatalf("execution %s of the dead owner survived recovery", x.ID)
				}
			}
			close(gate)
			a.Close(context.Background())
			b.ReportMetric(el.Seconds(), "open-s")
		})
	}
}

// numbered rewrites ? placeholders as $1, $2… for Postgres.
func numbered(q string) string {
	var out []byte
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			out = append(out, fmt.Sprintf("$%d", n)...)
			continue
		}
		out = append(out, q[i])
	}
	return string(out)
}

// envInt reads a size override for quicker runs.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
