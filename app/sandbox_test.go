package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
)

// commandFacts decodes the denial facts of a command record.
type commandFacts struct {
	ExitCode      *int   `json:"exit_code"`
	SandboxDenied bool   `json:"sandbox_denied"`
	Reason        string `json:"reason"`
	Limit         string `json:"limit"`
	Path          string `json:"path"`
	Dropped       int64  `json:"output_dropped_bytes"`
	StdoutBytes   int64  `json:"stdout_bytes"`
}

func factsOf(t *testing.T, c *desk.Command) commandFacts {
	t.Helper()
	var f commandFacts
	if err := json.Unmarshal(c.Facts, &f); err != nil {
		t.Fatalf("facts of %s: %v (%s)", c.ID, err, c.Facts)
	}
	return f
}

// probe asks /healthz every 100 ms until stop closes and returns the
// slowest answer; a failed probe fails the test.
func probe(t *testing.T, url string, stop <-chan struct{}) (slowest time.Duration, n int) {
	client := &http.Client{Timeout: 10 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return slowest, n
		case <-tick.C:
		}
		begin := time.Now()
		resp, err := client.Get(url + "/healthz")
		d := time.Since(begin)
		if err != nil {
			t.Errorf("health probe: %v", err)
			return slowest, n
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("health probe: %s", resp.Status)
		}
		n++
		slowest = max(slowest, d)
	}
}

// TestAgentSandboxBounds: through HTTP with a script session, each bound
// of the sandbox stops its command at the limit the workspace set, and the
// command is recorded as failed with facts.sandbox_denied and the limit
// named; the server answers its health probe while each runs.
func TestAgentSandboxBounds(t *testing.T) {
	apptest.Parallel(t)
	needSandbox(t)
	w := newAgentWorld(t)
	st := w.settings(map[string]any{"approval_mode": "auto-review", "sandbox": map[string]any{
		"processes": 64, "memory_bytes": 64 << 20, "cpu_seconds": 1, "tmp_bytes": 16 << 20, "output_bytes": 1 << 20}})
	if st.Sandbox.Processes != 64 || st.Sandbox.OutputBytes != 1<<20 {
		t.Fatalf("settings: %+v", st.Sandbox)
	}
	for _, c := range []struct {
		name, command, limit, reason string
	}{
		// Written to a file first: auto-review's rule set refuses a fork
		// bomb it can see, and the bound must hold for one it cannot.
		{"fork bomb", `printf 'f() { f | f & }; f\n' > /tmp/b.sh; sh /tmp/b.sh; sleep 100`, "processes", "process limit (64 processes)"},
		{"1 GB /tmp write", `dd if=/dev/zero of=/tmp/big bs=1M count=1024`, "tmp", "/tmp size limit (16 MiB)"},
		{"output flood", `yes | head -c 50000000`, "output", "output limit (1 MiB)"},
		{"memory hog", `python3 -c 'b = bytearray(1 << 30); [b.__setitem__(i, 1) for i in range(0, len(b), 4096)]'`, "memory", "memory limit (64 MiB)"},
		{"endless CPU loop", `while :; do :; done`, "cpu", "CPU time limit (1 s)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var slowest time.Duration
			var probes int
			wg.Add(1)
			go func() { defer wg.Done(); slowest, probes = probe(t, w.Server.URL, stop) }()
			begin := time.Now()
			x, cs := w.run(calls(sh(c.command)))
			took := time.Since(begin)
			close(stop)
			wg.Wait()
			cmd := cs[0]
			f := factsOf(t, cmd)
			if cmd.Status != desk.CommandFailed || !f.SandboxDenied || f.Limit != c.limit || !strings.Contains(f.Reason, c.reason) {
				t.Fatalf("%s: status %s facts %s", c.name, cmd.Status, cmd.Facts)
			}
			if v := w.resultOf(x, cmd); errCode(v) != "SANDBOX_DENIED" || v["sandbox_denied"] != true {
				t.Fatalf("the model's result: %v", v)
			}
			// Generous: a loaded 2-core machine. The measured figure is
			// logged for the record.
			if slowest > 3*time.Second {
				t.Errorf("the slowest health probe took %v", slowest)
			}
			t.Logf("%s: stopped after %v; %d health probes, slowest %v", c.name, took.Round(time.Millisecond), probes, slowest.Round(time.Microsecond))
			if c.limit == "output" {
				if f.Dropped <= 0 || len(cmd.Artifacts) != 1 {
					t.Fatalf("output flood: dropped %d, artifacts %v", f.Dropped, cmd.Artifacts)
				}
				if n := len(w.content(x.ID, cmd.Artifacts[0])); n != 1<<20 {
					t.Fatalf("the kept output artifact is %d bytes; want the 1 MiB limit", n)
				}
			}
		})
	}
}

// TestAgentSandboxWallDenials: writes that hit the sandbox's walls are
// sandbox denials naming the path, and a command that fails inside them
// is an ordinary failure.
func TestAgentSandboxWallDenials(t *testing.T) {
	apptest.Parallel(t)
	needSandbox(t)
	w := newAgentWorld(t)
	w.settings(map[string]any{"approval_mode": "auto-review"})
	_, cs := w.run(calls(sh("touch /etc/x"), sh("echo no > /artifacts/immutable/x.txt"), sh("ls /artifacts/missing")))
	for i, want := range []string{"/etc/x", "/artifacts/immutable/x.txt"} {
		f := factsOf(t, cs[i])
		if cs[i].Status != desk.CommandFailed || !f.SandboxDenied || f.Path != want || !strings.Contains(f.Reason, want) {
			t.Fatalf("%s: status %s facts %s", cs[i].Facts, cs[i].Status, cs[i].Facts)
		}
	}
	if f := factsOf(t, cs[2]); f.SandboxDenied || f.ExitCode == nil || *f.ExitCode == 0 || cs[2].Status != desk.CommandSucceeded {
		t.Fatalf("an ordinary failure: status %s facts %s", cs[2].Status, cs[2].Facts)
	}
}

// TestAgentSandboxSettingsRefused: a limit below its minimum is refused
// and the stored settings stay as they were.
func TestAgentSandboxSettingsRefused(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	w.settings(map[string]any{"sandbox": map[string]any{"cpu_seconds": 30}})
	w.Must(400, "PATCH", "/v1/workspaces/"+w.ws.ID+"/agent", map[string]any{"sandbox": map[string]any{"memory_bytes": 1024, "cpu_seconds": 5}}, nil)
	st := w.settings(map[string]any{})
	if st.Sandbox.CPUSeconds != 30 || st.Sandbox.MemoryBytes != 0 {
		t.Fatalf("settings after a refused patch: %+v", st.Sandbox)
	}
}
