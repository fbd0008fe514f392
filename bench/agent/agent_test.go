// Package agent benchmarks the agent's own cost, apart from any model:
//
//	go test -run '^$' -bench . -benchtime 20x ./bench/agent
//
// BenchmarkLoopStep runs turns of script sessions whose every step calls a
// cheap tool (list_files on an empty /artifacts), so what is measured is the
// loop itself: assembling the request, the script step, the command record,
// the transcript rows and the events. BenchmarkNoopExecution is the same
// number of turns through the execution model with an executor that does
// nothing, the reference the loop's cost is read against.
//
// BenchmarkContextAssembly builds the next request of a session with 50
// and with 5,000 artifacts: the world block names a count, never the
// artifacts, so the bytes are the same and the time does not grow (S-Q).
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/execution"
)

var admin = desk.WithPrincipal(context.Background(), desk.Principal{Admin: true})

func open(b *testing.B, ex execution.Executor) *app.App {
	cfg := app.Config{Home: b.TempDir(), AdminToken: "bench"}
	cfg.Executor = ex
	a, err := app.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(context.Background()) })
	return a
}

// stepsPerTurn is the number of tool-calling steps of one benchmark turn;
// the turn makes one more model call, the final answer.
const stepsPerTurn = 10

func script() json.RawMessage {
	type call struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	type step struct {
		Text      string `json:"text,omitempty"`
		ToolCalls []call `json:"tool_calls,omitempty"`
	}
	var s struct {
		Steps []step `json:"steps"`
	}
	for range stepsPerTurn {
		s.Steps = append(s.Steps, step{ToolCalls: []call{{Name: "list_files", Arguments: map[string]any{"path": "/artifacts"}}}})
	}
	s.Steps = append(s.Steps, step{Text: "done"})
	b, _ := json.Marshal(s)
	return b
}

// runTurns sends one message to each of n fresh sessions, one turn at a
// time, and waits for each to settle.
func runTurns(b *testing.B, a *app.App, ws *desk.Workspace, n int, model string) {
	b.Helper()
	var sessions []*desk.Session
	for range n {
		in := desk.SessionCreate{WorkspaceID: ws.ID, Title: "bench", Model: model}
		if model == "script" {
			in.Script = script()
		}
		x, err := a.Sessions.Create(admin, in)
		if err != nil {
			b.Fatal(err)
		}
		sessions = append(sessions, x)
	}
	b.ResetTimer()
	for _, x := range sessions {
		res, err := a.Exec.Submit(admin, x.ID, desk.SubmitInput{Text: "go"})
		if err != nil {
			b.Fatal(err)
		}
		waitSettled(b, a, x.ID, res)
	}
	b.StopTimer()
}

func waitSettled(b *testing.B, a *app.App, ses string, res *desk.SubmitResult) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		xs, err := a.Store.ListExecutions(context.Background(), ses, 1)
		if err != nil {
			b.Fatal(err)
		}
		if len(xs) == 1 && xs[0].Terminal() {
			if xs[0].Phase != desk.PhaseEnded {
				b.Fatalf("turn %s: %s (%s)", xs[0].ID, xs[0].Phase, xs[0].Reason)
			}
			return
		}
		time.Sleep(200 * time.Microsecond)
	}
	b.Fatalf("turn of %s did not settle", ses)
}

func BenchmarkLoopStep(b *testing.B) {
	a := open(b, nil)
	ws, err := a.Workspaces.CreateWorkspace(admin, desk.WorkspaceCreate{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	runTurns(b, a, ws, b.N, "script")
	steps := b.N * (stepsPerTurn + 1)
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(steps), "µs/step")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/turn")
}

// noop settles at once: the execution model's own cost per turn.
type noop struct{}

func (noop) Execute(ctx context.Context, t *execution.Turn) (*execution.Outcome, error) {
	if err := t.Started(); err != nil {
		return nil, err
	}
	return &execution.Outcome{}, nil
}

func BenchmarkNoopExecution(b *testing.B) {
	a := open(b, noop{})
	ws, err := a.Workspaces.CreateWorkspace(admin, desk.WorkspaceCreate{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	runTurns(b, a, ws, b.N, "")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/turn")
}

func BenchmarkContextAssembly(b *testing.B) {
	a := open(b, nil)
	ws, err := a.Workspaces.CreateWorkspace(admin, desk.WorkspaceCreate{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	sizes := map[int]string{}
	for _, n := range []int{50, 5000} {
		x, err := a.Sessions.Create(admin, desk.SessionCreate{WorkspaceID: ws.ID, Title: "ctx", Model: "script", Script: script()})
		if err != nil {
			b.Fatal(err)
		}
		// Rows only: assembly reads the count, never a file.
		now := desk.Now()
		for i := range n {
			art := &desk.Artifact{ID: desk.NewID("art"), SessionID: x.ID, WorkspaceID: ws.ID, Name: fmt.Sprintf("a%05d.md", i),
				Path: fmt.Sprintf("/artifacts/a%05d.md", i), RelPath: fmt.Sprintf("a%05d.md", i), Kind: "text", MediaType: "text/markdown",
				Size: 3, SHA256: strings.Repeat("0", 64), Revision: 1, ActorID: x.Actor, CreatedAt: now, UpdatedAt: now,
				Origin: desk.Origin{WorkspaceID: ws.ID, SessionID: x.ID, Actor: x.Actor, Kind: desk.OriginUser}}
			if err := a.Store.CreateArtifact(context.Background(), art); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("artifacts=%d", n), func(b *testing.B) {
			var js []byte
			for b.Loop() {
				v, err := a.Agent.Context(context.Background(), x, "")
				if err != nil {
					b.Fatal(err)
				}
				js, _ = json.Marshal(v)
			}
			sizes[n] = string(js)
			b.ReportMetric(float64(len(js)), "bytes")
		})
	}
	// The count is the only difference, and nothing else may be: the
	// budget's token estimate may move by the one token the two extra
	// digits cost, and is compared apart.
	small, smallTokens := withoutBudget(b, sizes[50])
	big, bigTokens := withoutBudget(b, sizes[5000])
	if strings.ReplaceAll(big, "5000", "50") != small || bigTokens-smallTokens > 1 || bigTokens < smallTokens {
		b.Fatalf("the contexts differ in more than the artifact count:\n%s\n%s", sizes[50], sizes[5000])
	}
}

// withoutBudget returns a context view's JSON without its budget, and the
// budget's estimate of used tokens.
func withoutBudget(b *testing.B, js string) (string, float64) {
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		b.Fatal(err)
	}
	budget, _ := m["budget"].(map[string]any)
	used, ok := budget["used_tokens"].(float64)
	if !ok {
		b.Fatalf("no budget.used_tokens in %s", js)
	}
	delete(m, "budget")
	out, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return string(out), used
}
