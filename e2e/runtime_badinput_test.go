package e2e

// Bad input to the runtime registry and to runtime-backed session
// creation, through the real binary's HTTP API and its CLI: each refused
// with an error naming what was wrong, and nothing stored.

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

func TestRuntimeRegistryBadInput(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	d := startDesk(t, deskOpts{Home: home, Token: restartToken})
	admin := api{t: t, url: d.URL, token: d.Token}
	var ws desk.Workspace
	admin.must(201, "POST", "/v1/workspaces", map[string]string{"name": "registry"}, &ws)
	var made struct {
		Token string `json:"token"`
	}
	admin.must(201, "POST", "/v1/workspaces/"+ws.ID+"/actors", map[string]string{"name": "bot", "kind": desk.ActorAgent}, &made)
	actor := api{t: t, url: d.URL, token: made.Token}

	notExec := filepath.Join(t.TempDir(), "not-a-program")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"unknown protocol", map[string]any{"name": "x", "protocol": "pi-rpc", "argv": []string{"/bin/sh"}}, `unknown runtime protocol "pi-rpc": use one of acp, codex-app-server, claude-stream-json`},
		{"non-executable argv", map[string]any{"name": "x", "protocol": "acp", "argv": []string{notExec}}, "is not an executable file"},
		{"missing program", map[string]any{"name": "x", "protocol": "acp", "argv": []string{"no-such-agent-program"}}, `"no-such-agent-program" is not a program on desk's PATH`},
		{"no argv", map[string]any{"name": "x", "protocol": "acp", "argv": []string{}}, "argv is required"},
		{"env value", map[string]any{"name": "x", "protocol": "acp", "argv": []string{"/bin/sh"}, "env": []string{"KEY=secret"}}, "give names of environment variables"},
		{"provider key in env", map[string]any{"name": "x", "protocol": "acp", "argv": []string{"/bin/sh"}, "env": []string{"HOME_PROXY", "ANTHROPIC_API_KEY"}}, "ANTHROPIC_API_KEY is given to every runtime child by desk's model gateway"},
		{"compatible key in env", map[string]any{"name": "x", "protocol": "acp", "argv": []string{"/bin/sh"}, "env": []string{"OPENAI_COMPATIBLE_API_KEY"}}, "a runtime never holds one"},
	} {
		st, body := admin.do("POST", "/v1/runtimes", c.body, nil)
		if st != 400 || !strings.Contains(errorMessage(body), c.want) {
			t.Errorf("%s: %d %s; want 400 naming %q", c.name, st, body, c.want)
		}
	}

	// An actor can neither register, list nor remove runtimes.
	admin.must(201, "POST", "/v1/runtimes", map[string]any{"name": "ok", "protocol": "acp", "argv": []string{"/bin/sh"}}, nil)
	for _, r := range [][2]string{{"POST", "/v1/runtimes"}, {"GET", "/v1/runtimes"}, {"DELETE", "/v1/runtimes/ok"}} {
		var body any
		if r[0] == "POST" {
			body = map[string]any{"name": "mine", "protocol": "acp", "argv": []string{"/bin/sh"}}
		}
		if st, b := actor.do(r[0], r[1], body, nil); st != 403 || !strings.Contains(b, "admin") {
			t.Errorf("actor %s %s: %d %s, want 403", r[0], r[1], st, b)
		}
	}
	// An actor picks a registered runtime by name, but can never pass argv.
	if st, b := actor.do("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"runtime": "ok", "argv": []string{"/bin/sh", "-c", "id"}}, nil); st != 400 || !strings.Contains(b, "argv") {
		t.Errorf("actor session with argv: %d %s, want 400 naming argv", st, b)
	}
	if st, b := actor.do("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"runtime": "nope"}, nil); st != 400 || !strings.Contains(b, "nope") {
		t.Errorf("unknown runtime: %d %s, want 400 naming it", st, b)
	}
	var ses desk.Session
	actor.must(201, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"runtime": "ok"}, &ses)
	if ses.Runtime != "ok" {
		t.Fatalf("session runtime %q", ses.Runtime)
	}

	// The CLI says the same and exits non-zero.
	cli := func(args ...string) (string, error) {
		cmd := deskCmd(t.Context(), cleanEnv("DESK_HOME="+home), append([]string{"--server", d.URL, "--token", d.Token}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	var exit *exec.ExitError
	if out, err := cli("runtime", "add", "bad", "--protocol", "pi-rpc", "--", "/bin/sh"); !errors.As(err, &exit) || !strings.Contains(out, `unknown runtime protocol "pi-rpc"`) {
		t.Errorf("cli unknown protocol: %v %s", err, out)
	}
	if out, err := cli("runtime", "add", "bad", "--protocol", "acp", "--", notExec); !errors.As(err, &exit) || !strings.Contains(out, "is not an executable file") {
		t.Errorf("cli non-executable: %v %s", err, out)
	}
	if out, err := cli("runtime", "add", "bad", "--protocol", "claude-stream-json", "--env", "ANTHROPIC_API_KEY", "--", "sh"); !errors.As(err, &exit) || !strings.Contains(out, "desk's model gateway") {
		t.Errorf("cli provider key: %v %s", err, out)
	}
	if out, err := cli("runtime", "add", "cli-ok", "--protocol", "claude-stream-json", "--env", "DISABLE_TELEMETRY", "--", "sh"); err != nil || !strings.Contains(out, "registered runtime cli-ok") {
		t.Fatalf("cli add: %v %s", err, out)
	}
	out, err := cli("runtime", "ls")
	if err != nil || !strings.Contains(out, "cli-ok") || !strings.Contains(out, "DISABLE_TELEMETRY") || strings.Contains(out, "bad") {
		t.Fatalf("cli ls: %v %s", err, out)
	}
	var list struct{ Runtimes []desk.Runtime }
	admin.must(200, "GET", "/v1/runtimes", nil, &list)
	if len(list.Runtimes) != 2 {
		t.Fatalf("stored runtimes %+v, want only ok and cli-ok", list.Runtimes)
	}
	if out, err := cli("runtime", "rm", "cli-ok"); err != nil || !strings.Contains(out, "removed runtime cli-ok") {
		t.Fatalf("cli rm: %v %s", err, out)
	}
}

// errorMessage is the message of an API error body.
func errorMessage(body string) string {
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	json.Unmarshal([]byte(body), &e)
	return e.Error.Message
}
