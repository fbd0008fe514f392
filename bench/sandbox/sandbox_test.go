// Package sandbox benchmarks the start of a sandboxed command, side by
// side in one run:
//
//	DESK_BENCH_SANDBOX=1 go test -run TestSandboxStart -v ./bench/sandbox
//
// desk: a script session whose every step is one exec_command `true`; the
// figure is each command record's started_at to finished_at, the tool's
// whole run (plan, cgroup, bubblewrap, wait, denial classification,
// setuid strip, artifact scan) from tool start to exit.
//
// bwrap: the benchmark runs `bwrap … true` itself, with the namespaces and
// system mounts a desk sandbox has (no desk, no cgroup, no limits), timed
// from fork to exit.
//
// The two sides alternate in ten rounds. It reports p50 and p99 of each
// and the ratio. BENCH_N sets the number of commands of each (default
// 100). It is a test, not a Go benchmark, so that
// both sides run in the same process and the same minute, and it asserts
// nothing about speed: the numbers are for the reader.
package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/sandbox"
)

func TestSandboxStart(t *testing.T) {
	if os.Getenv("DESK_BENCH_SANDBOX") == "" {
		t.Skip("set DESK_BENCH_SANDBOX=1 to run the sandbox start benchmark")
	}
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no working sandbox: %v", err)
	}
	n := 100
	if v, err := strconv.Atoi(os.Getenv("BENCH_N")); err == nil && v > 0 {
		n = v
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}

	// The two sides alternate in rounds (a turn of n/rounds commands, then
	// as many bwrap runs), so that both see the same machine: on a shared
	// machine the load changes from one second to the next.
	rounds := min(10, n)
	cfg := app.Config{}
	cfg.Agent.MaxSteps = n/rounds + 2
	e := apptest.Start(t, cfg)
	var ws desk.Workspace
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "bench"}, &ws)
	e.Must(200, "PATCH", "/v1/workspaces/"+ws.ID+"/agent", map[string]any{"approval_mode": "auto-review"}, nil)
	args := bwrapArgs()
	var deskTimes, bwrapTimes []time.Duration
	for r := range rounds {
		k := n / rounds
		if r == rounds-1 {
			k = n - (rounds-1)*(n/rounds)
		}
		deskTimes = append(deskTimes, deskRound(t, e, ws, k)...)
		for range k {
			begin := time.Now()
			if out, err := exec.Command(bwrap, args...).CombinedOutput(); err != nil {
				t.Fatalf("bwrap: %v: %s", err, out)
			}
			bwrapTimes = append(bwrapTimes, time.Since(begin))
		}
	}

	dp50, dp99 := pct(deskTimes, 50), pct(deskTimes, 99)
	bp50, bp99 := pct(bwrapTimes, 50), pct(bwrapTimes, 99)
	report := fmt.Sprintf("sandbox start, %d commands each:\n"+
		"  desk exec_command true (tool start to exit): p50 %v  p99 %v\n"+
		"  bwrap … true run directly:                   p50 %v  p99 %v\n"+
		"  ratio desk/bwrap:                            p50 %.2f  p99 %.2f",
		n, dp50, dp99, bp50, bp99, float64(dp50)/float64(bp50), float64(dp99)/float64(bp99))
	t.Log("\n" + report)
}

// deskRound runs one turn of k exec_command `true` calls in a new script
// session and returns each command record's started_at to finished_at.
func deskRound(t *testing.T, e *apptest.Env, ws desk.Workspace, k int) []time.Duration {
	var steps []map[string]any
	for range k {
		steps = append(steps, map[string]any{"tool_calls": []map[string]any{{"name": "exec_command", "arguments": map[string]any{"command": "true"}}}})
	}
	steps = append(steps, map[string]any{"text": "done"})
	var x desk.Session
	e.Must(201, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{"steps": steps}}, &x)
	e.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "go"}, nil)
	// The commands are read from the store: the transcript route pages.
	var cmds []*desk.Command
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var ex struct{ Executions []desk.Execution }
		e.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &ex)
		if len(ex.Executions) == 1 && ex.Executions[0].Terminal() {
			all, err := e.App.Store.ListCommands(context.Background(), []string{ex.Executions[0].ID})
			if err != nil {
				t.Fatal(err)
			}
			cmds = all
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn did not end")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(cmds) != k {
		t.Fatalf("%d commands; want %d", len(cmds), k)
	}
	var out []time.Duration
	for _, c := range cmds {
		if c.Status != desk.CommandSucceeded {
			t.Fatalf("command %s: %s %s", c.ID, c.Status, c.Error)
		}
		out = append(out, c.FinishedAt.Sub(*c.StartedAt))
	}
	return out
}

// bwrapArgs are the namespaces and system mounts a desk sandbox has,
// without desk: no cgroup, no limits, no /etc, no guest mounts.
func bwrapArgs() []string {
	args := []string{"--die-with-parent", "--new-session", "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
		"--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		if target, err := os.Readlink(d); err == nil {
			args = append(args, "--symlink", target, d)
		} else if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			args = append(args, "--ro-bind", d, d)
		}
	}
	return append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--remount-ro", "/", "--", "/bin/sh", "-c", "true")
}

// pct is the p-th percentile (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))].Round(10 * time.Microsecond)
}
