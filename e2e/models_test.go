package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk/client"
)

// TestUndeclaredModelRefusedByCLIAndACP: through the real binary, desk
// session create --model and desk acp --model with a model the operator
// did not declare (a URL of the caller's choosing) are refused, naming
// the declared models; nothing is created and the URL receives nothing.
func TestUndeclaredModelRefusedByCLIAndACP(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer trap.Close()
	undeclared := "openai-compatible:" + trap.URL + "/v1#m"
	d := startDesk(t, deskOpts{Env: []string{"DESK_MODELS=openai:gpt-4.1, anthropic:claude-sonnet-4-5", "OPENAI_COMPATIBLE_API_KEY=sk-test-0123456789abcdefghij"}})
	ws := d.workspace("models", false)

	errOut := d.fail(exitInvalid, "session", "create", ws, "--model", undeclared)
	if !strings.Contains(errOut, "not offered") || !strings.Contains(errOut, "openai:gpt-4.1, anthropic:claude-sonnet-4-5, script") {
		t.Fatalf("session create --model %s: %s", undeclared, errOut)
	}

	// desk acp: session/new is refused with the same words.
	cmd := deskCmd(t.Context(), d.Env, "--server", d.URL, "acp", "--workspace", "models", "--model", undeclared)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	answers := make(chan map[string]json.RawMessage, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]json.RawMessage
			json.Unmarshal(sc.Bytes(), &m)
			answers <- m
		}
		close(answers)
	}()
	ask := func(line string) map[string]json.RawMessage {
		t.Helper()
		io.WriteString(stdin, line+"\n")
		select {
		case m := <-answers:
			return m
		case <-time.After(30 * time.Second):
			t.Fatalf("no answer to %s", line)
		}
		return nil
	}
	ask(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	m := ask(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"` + filepath.ToSlash(t.TempDir()) + `","mcpServers":[]}}`)
	if m["result"] != nil || !strings.Contains(string(m["error"]), "not offered") || !strings.Contains(string(m["error"]), "openai:gpt-4.1") {
		t.Fatalf("acp session/new on %s: %v", undeclared, m)
	}
	stdin.Close()

	adm, err := client.New(d.URL, readToken(t, d.Home))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := adm.ListSessions(context.Background(), ws, client.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 0 || hits.Load() != 0 {
		t.Fatalf("%d sessions made, %d requests to the undeclared server", len(ss), hits.Load())
	}
}

// TestServeRefusesBadModelList: a DESK_MODELS entry that does not parse
// stops desk serve at startup, naming the entry.
func TestServeRefusesBadModelList(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := deskCmd(ctx, cleanEnv("DESK_HOME="+home, "DESK_MODELS=openai:gpt-4.1,openai-compatible:ftp://models.internal/v1#m"), "serve", "--addr", "127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("desk serve ran with a bad DESK_MODELS: %s", out)
	}
	if err == nil || !strings.Contains(string(out), `DESK_MODELS entry "openai-compatible:ftp://models.internal/v1#m"`) {
		t.Fatalf("desk serve with a bad DESK_MODELS: %v\n%s", err, out)
	}
}
