package app_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/internal/leaktest"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
)

// TestMain lets the crash test run this test binary as a desk server child
// process (DESK_CRASH_CHILD=1) that can be killed with SIGKILL. Otherwise
// it runs the tests and fails them when any goroutine outlives them: the
// parallel tests' desks are checked here (apptest.Parallel).
func TestMain(m *testing.M) {
	if os.Getenv("DESK_CRASH_CHILD") == "1" {
		crashChild()
		return
	}
	leaktest.Main(m)
}

// crashChild serves desk with an executor that records, durably, every turn
// it starts in a ledger file: an item listed twice ran twice.
func crashChild() {
	ledger, err := os.OpenFile(os.Getenv("DESK_CRASH_LEDGER"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		panic(err)
	}
	ex := execution.ExecutorFunc(func(ctx context.Context, t *execution.Turn) (*execution.Outcome, error) {
		if err := t.Started(); err != nil {
			return nil, err
		}
		if _, err := fmt.Fprintf(ledger, "%s\n", t.Item.ID); err != nil {
			return nil, err
		}
		if err := ledger.Sync(); err != nil {
			return nil, err
		}
		select {
		case <-time.After(time.Duration(5+rand.IntN(25)) * time.Millisecond):
			return &execution.Outcome{Reply: "done " + t.Item.Text}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	a, err := app.Open(context.Background(), app.Config{
		Home: os.Getenv("DESK_CRASH_HOME"), Postgres: os.Getenv("DESK_CRASH_PG"), AdminToken: "crash",
		Executor: ex, Execution: execution.Options{PollInterval: 50 * time.Millisecond},
	})
	if err != nil {
		panic(err)
	}
	err = a.Serve(context.Background(), "127.0.0.1:0", time.Second, func(addr net.Addr) {
		fmt.Printf("URL http://%s\n", addr)
	})
	panic(err)
}

func startCrashChild(t *testing.T, home, pg, ledger string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DESK_CRASH_CHILD=1", "DESK_CRASH_HOME="+home, "DESK_CRASH_PG="+pg, "DESK_CRASH_LEDGER="+ledger)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "URL ") {
		t.Fatalf("crash child did not start: %q %v", line, err)
	}
	cmd.Env = append(cmd.Env, "URL="+strings.TrimSpace(line[4:]))
	return cmd
}

func childURL(cmd *exec.Cmd) string {
	for _, kv := range cmd.Env {
		if strings.HasPrefix(kv, "URL=") {
			return kv[4:]
		}
	}
	return ""
}

// crashRun submits 200 messages to 20 sessions while killing the server
// with SIGKILL at random moments and restarting it, then checks that every
// acknowledged message was delivered exactly once, or is shown interrupted
// (owner-restarted) or still queued: none lost, none run twice.
func crashRun(t *testing.T, pg string) {
	home := t.TempDir()
	ledger := filepath.Join(t.TempDir(), "ledger")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	child := startCrashChild(t, home, pg, ledger)
	c := &apptest.Client{BaseURL: childURL(child), Token: "crash"}

	var ws desk.Workspace
	c.Must(t, 201, "POST", "/v1/workspaces", map[string]string{"name": "crash"}, &ws)
	var sessions []string
	for range 20 {
		var x desk.Session
		c.Must(t, 201, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]string{}, &x)
		sessions = append(sessions, x.ID)
	}
	acked := map[string]string{} // idempotency key → queue item id
	kills := 0
	nextKill := 5 + rng.IntN(15)
	for i := 0; i < 200; {
		key := fmt.Sprintf("msg-%03d", i)
		ses := sessions[i%len(sessions)]
		var res desk.SubmitResult
		status, err := c.Try("POST", "/v1/sessions/"+ses+"/messages", map[string]string{"text": "m " + key, "idempotency_key": key}, &res)
		if err == nil && (status == 202 || status == 200) {
			acked[key] = res.Item.ID
			i++
		}
		if err != nil || len(acked) >= nextKill {
			// Kill at a random moment: right away, or while turns run.
			time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
			child.Process.Signal(syscall.SIGKILL)
			child.Wait()
			kills++
			nextKill = len(acked) + 5 + rng.IntN(15)
			child = startCrashChild(t, home, pg, ledger)
			c.BaseURL = childURL(child)
		}
	}
	// Let the last server drain its queues, then stop it cleanly.
	waitFor(t, "the queues to drain", func() bool {
		for _, s := range sessions {
			var q struct{ Items []desk.QueueItem }
			if st, err := c.Try("GET", "/v1/sessions/"+s+"/queue", nil, &q); err != nil || st != 200 || len(q.Items) > 0 {
				return false
			}
		}
		return true
	})
	child.Process.Signal(syscall.SIGTERM)
	child.Wait()

	// Check the outcome in the store directly.
	a, err := app.Open(context.Background(), app.Config{Home: home, Postgres: pg, AdminToken: "crash"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	b, _ := os.ReadFile(ledger)
	ran := map[string]int{}
	for _, id := range strings.Fields(string(b)) {
		ran[id]++
	}
	var delivered, interrupted int
	for key, id := range acked {
		it, err := a.Store.GetQueueItem(t.Context(), id)
		if err != nil {
			t.Fatalf("acknowledged message %s lost: %v", key, err)
		}
		if ran[id] > 1 {
			t.Fatalf("message %s ran %d times", key, ran[id])
		}
		switch it.Status {
		case desk.QueueStatusDelivered:
			x, err := a.Store.GetExecution(t.Context(), it.ExecutionID)
			if err != nil {
				t.Fatal(err)
			}
			switch x.Phase {
			case desk.PhaseEnded:
				if ran[id] != 1 {
					t.Fatalf("message %s ended but ran %d times", key, ran[id])
				}
				delivered++
			case desk.PhaseInterrupted:
				if x.Reason != "owner-restarted" {
					t.Fatalf("message %s interrupted for %q", key, x.Reason)
				}
				interrupted++
			default:
				t.Fatalf("message %s delivered to a %s execution", key, x.Phase)
			}
		default:
			t.Fatalf("message %s is %s after draining", key, it.Status)
		}
	}
	if len(acked) != 200 || delivered+interrupted != 200 {
		t.Fatalf("acked %d, delivered %d, interrupted %d", len(acked), delivered, interrupted)
	}
	t.Logf("%d kills: %d delivered once, %d shown interrupted (owner-restarted), none lost, none run twice", kills, delivered, interrupted)
	if kills < 5 {
		t.Fatalf("only %d kills", kills)
	}
}

func TestCrashSQLite(t *testing.T) {
	apptest.Parallel(t)
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	crashRun(t, "")
}

func TestCrashPostgres(t *testing.T) {
	apptest.Parallel(t)
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	crashRun(t, pgtest.DSN(t))
}
