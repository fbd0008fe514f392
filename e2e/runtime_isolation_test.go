package e2e

// Runtime children see their session only (issue 23): the real desk
// binary, real bubblewrap, and children that are real processes in the
// real sandbox — a /bin/sh script speaking just enough ACP to take turns,
// so a child stays alive between turns as a real runtime's does. Each
// turn's text tells the script what to do: PLANT writes a secret into
// its state directory (its HOME, /runtime-home); LOOK writes what it can
// see of runtime state into /workspace, where the test reads it.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
)

// probeScript is an ACP agent in sh: initialize, session/new and
// session/prompt answered by id; its marker is $0.
const probeScript = `
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  case "$line" in
  *'"method":"initialize"'*)
    printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"authMethods":[]}}\n' "$id" ;;
  *'"method":"session/new"'*)
    printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"probe-%s"}}\n' "$id" "$0" ;;
  *'"method":"session/load"'*)
    printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" ;;
  *'"method":"session/prompt"'*)
    text=$(printf '%s\n' "$line" | sed -n 's/.*"text":"\([^"]*\)".*/\1/p')
    set -- $text
    case "$1" in
    PLANT) echo "secret-$2" > /runtime-home/planted ;;
    LOOK) { echo "ls:"; ls -A /runtime-home; echo "own:"; cat /runtime-home/planted; echo "host:"; cat "$3"; } > "/workspace/look-$2" 2>&1 ;;
    esac
    printf '{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}\n' "$id" ;;
  *'"id":'*)
    printf '{"jsonrpc":"2.0","id":%s,"result":null}\n' "$id" ;;
  esac
done
`

// markerProcs lists the live host processes whose command line holds
// marker (the sandbox's bwrap and the script under it).
func markerProcs(marker string) []hostProc {
	var out []hostProc
	for _, p := range processes() {
		if p.state != "Z" && strings.Contains(p.cmd, marker) {
			out = append(out, p)
		}
	}
	return out
}

func TestRuntimeIsolation(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap (bwrap) is not installed: runtime children run only in its sandbox here")
	}
	home := filepath.Join(t.TempDir(), "home")
	d := startDesk(t, deskOpts{Home: home, Token: restartToken})
	admin := api{t: t, url: d.URL, token: d.Token}
	var ws desk.Workspace
	admin.must(201, "POST", "/v1/workspaces", map[string]string{"name": "isolation"}, &ws)
	var bot struct {
		Token string `json:"token"`
	}
	admin.must(201, "POST", "/v1/workspaces/"+ws.ID+"/actors", map[string]string{"name": "other", "kind": desk.ActorAgent}, &bot)
	other := api{t: t, url: d.URL, token: bot.Token}

	// A runtime's marker is its children's $0, on their command lines.
	marker := func(runtime string) string { return "desk-probe-" + runtime + "-" + ws.ID }
	register := func(runtime string) {
		admin.must(201, "POST", "/v1/runtimes", map[string]any{"name": runtime, "protocol": "acp", "argv": []string{"/bin/sh", "-c", probeScript, marker(runtime)}}, nil)
	}
	session := func(as api, ws, runtime string) desk.Session {
		var s desk.Session
		as.must(201, "POST", "/v1/workspaces/"+ws+"/sessions", map[string]string{"runtime": runtime}, &s)
		return s
	}
	turn := func(as api, s desk.Session, text string) {
		t.Helper()
		if x := as.settled(as.send(s.ID, text)); x.Phase != desk.PhaseEnded {
			t.Fatalf("turn %q of %s: %s (%s)", text, s.ID, x.Phase, x.Reason)
		}
	}
	look := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(home, "workspaces", ws.ID, layout.CheckoutDir, "look-"+name))
		if err != nil {
			t.Fatalf("the probe's findings: %v", err)
		}
		return string(b)
	}
	state := func(s desk.Session) string {
		return filepath.Join(home, "workspaces", s.WorkspaceID, layout.RuntimeStateRel(s.ID))
	}

	// Three sessions of one runtime: the state directory used to be one
	// per workspace and runtime, shared by all three.
	register("probe")
	a1 := session(admin, ws.ID, "probe") // the owner's
	a2 := session(admin, ws.ID, "probe") // the owner's second session
	b1 := session(other, ws.ID, "probe") // another actor's
	if a1.Actor == b1.Actor || a1.Actor != a2.Actor {
		t.Fatalf("actors: a1 %s, a2 %s, b1 %s", a1.Actor, a2.Actor, b1.Actor)
	}
	turn(admin, a1, "PLANT a1")
	planted := filepath.Join(state(a1), "planted")
	if b, err := os.ReadFile(planted); err != nil || strings.TrimSpace(string(b)) != "secret-a1" {
		t.Fatalf("a1's child wrote no secret into its state directory %s: %q %v", state(a1), b, err)
	}

	t.Run("sessions-see-their-own-state-only", func(t *testing.T) {
		// The same session sees what it planted (the probe works) ...
		turn(admin, a1, "LOOK a1 "+planted)
		if got := look("a1"); !strings.Contains(got, "planted") || !strings.Contains(got, "secret-a1") {
			t.Fatalf("a1 does not see its own state:\n%s", got)
		}
		// ... another actor's session and the same actor's other session
		// see neither the file in /runtime-home nor its host path.
		for _, c := range []struct {
			as   api
			s    desk.Session
			name string
		}{{other, b1, "b1"}, {admin, a2, "a2"}} {
			turn(c.as, c.s, "LOOK "+c.name+" "+planted)
			got := look(c.name)
			t.Logf("%s sees:\n%s", c.name, got)
			if strings.Contains(got, "planted") && !strings.Contains(got, "No such file") || strings.Contains(got, "secret-a1") {
				t.Fatalf("%s sees a1's runtime state:\n%s", c.name, got)
			}
			if ls, _, _ := strings.Cut(strings.TrimPrefix(got, "ls:\n"), "own:"); strings.Contains(ls, "planted") {
				t.Fatalf("%s lists a1's file in /runtime-home:\n%s", c.name, got)
			}
		}
	})

	// Two more sessions, each of a runtime of its own so that their
	// children are told apart by marker, with a child alive and idle.
	register("k1")
	register("k2")
	k1, k2 := session(admin, ws.ID, "k1"), session(admin, ws.ID, "k2")
	turn(admin, k1, "PLANT k1")
	turn(admin, k2, "PLANT k2")
	for _, n := range []string{"probe", "k1", "k2"} {
		if len(markerProcs(marker(n))) == 0 {
			t.Fatalf("runtime %s has no live child between turns", n)
		}
	}
	// DELETE of a session returns once its child is gone, and only its.
	t.Run("delete-stops-the-child", func(t *testing.T) {
		admin.must(204, "DELETE", "/v1/sessions/"+k1.ID, nil, nil)
		if ps := markerProcs(marker("k1")); len(ps) != 0 {
			t.Fatalf("the deleted session's child still runs: %+v", ps)
		}
		if _, err := os.Stat(state(k1)); !os.IsNotExist(err) || state(k1) == state(k2) {
			t.Fatalf("the deleted session's state directory: %v", err)
		}
		for _, n := range []string{"probe", "k2"} {
			if len(markerProcs(marker(n))) == 0 {
				t.Fatalf("deleting k1 stopped a child of %s", n)
			}
		}
	})

	t.Run("offboard-stops-the-children", func(t *testing.T) {
		admin.must(200, "POST", "/v1/workspaces/"+ws.ID+"/offboard", map[string]string{"reason": "done"}, nil)
		for _, n := range []string{"probe", "k2"} {
			if ps := markerProcs(marker(n)); len(ps) != 0 {
				t.Fatalf("a child of the offboarded workspace (%s) still runs: %+v", n, ps)
			}
		}
		// The state directories moved with the workspace, and purge
		// takes them.
		if _, err := os.Stat(filepath.Join(home, "departed-workspaces", ws.ID, layout.RuntimeStateRel(a2.ID))); err != nil {
			t.Fatalf("a2's state directory did not move with the workspace: %v", err)
		}
		admin.must(200, "POST", "/v1/workspaces/"+ws.ID+"/purge", map[string]string{"confirm": ws.ID}, nil)
		if _, err := os.Stat(filepath.Join(home, "departed-workspaces", ws.ID)); !os.IsNotExist(err) {
			t.Fatalf("the purged workspace's directory: %v", err)
		}
	})

	t.Run("absorb-stops-the-sources-children", func(t *testing.T) {
		var src, dst desk.Workspace
		admin.must(201, "POST", "/v1/workspaces", map[string]string{"name": "absorbed"}, &src)
		admin.must(201, "POST", "/v1/workspaces", map[string]string{"name": "absorber"}, &dst)
		register("src")
		s := session(admin, src.ID, "src")
		turn(admin, s, "PLANT src")
		if len(markerProcs(marker("src"))) == 0 {
			t.Fatal("the source has no live child")
		}
		var plan desk.AbsorbPlan
		admin.must(200, "GET", "/v1/workspaces/"+dst.ID+"/absorb?source="+src.ID, nil, &plan)
		admin.must(200, "POST", "/v1/workspaces/"+dst.ID+"/absorb?source="+src.ID, map[string]string{"digest": plan.Digest}, nil)
		if ps := markerProcs(marker("src")); len(ps) != 0 {
			t.Fatalf("the absorbed workspace's child still runs: %+v", ps)
		}
	})
}

// A runtime whose bound directory contains DESK_HOME, or lies inside it,
// is refused over HTTP with 400 naming the overlap, however its path is
// spelled; nothing is stored.
func TestRuntimeInstallOverlappingDeskHome(t *testing.T) {
	t.Parallel()
	user := t.TempDir() // a user's ~, with DESK_HOME in it
	home := filepath.Join(user, ".desk")
	d := startDesk(t, deskOpts{Home: home, Token: restartToken})
	admin := api{t: t, url: d.URL, token: d.Token}
	write := func(p string) string {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inUser := write(filepath.Join(user, "agent"))
	inHome := write(filepath.Join(home, "tools", "agent"))
	elsewhere := t.TempDir()
	viaLinkToUser := filepath.Join(elsewhere, "me")
	viaLinkIntoHome := filepath.Join(elsewhere, "tools")
	for _, l := range [][2]string{{user, viaLinkToUser}, {filepath.Join(home, "tools"), viaLinkIntoHome}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	realHome, _ := filepath.EvalSymlinks(home)
	for _, c := range []struct{ argv0, want string }{
		{inUser, "contains DESK_HOME " + realHome},
		{filepath.Join(viaLinkToUser, "agent"), "contains DESK_HOME " + realHome},
		{inHome, "lies inside DESK_HOME " + realHome},
		{filepath.Join(viaLinkIntoHome, "agent"), "lies inside DESK_HOME " + realHome},
	} {
		st, body := admin.do("POST", "/v1/runtimes", map[string]any{"name": "near-home", "protocol": "acp", "argv": []string{c.argv0}}, nil)
		if st != 400 || !strings.Contains(errorMessage(body), c.want) || !strings.Contains(errorMessage(body), "the program's directory") {
			t.Errorf("%s: %d %s; want 400 naming %q", c.argv0, st, body, c.want)
		}
	}
	var ls struct{ Runtimes []desk.Runtime }
	admin.must(200, "GET", "/v1/runtimes", nil, &ls)
	if len(ls.Runtimes) != 0 {
		t.Fatalf("refused runtimes were stored: %+v", ls.Runtimes)
	}
	// A program elsewhere is fine.
	admin.must(201, "POST", "/v1/runtimes", map[string]any{"name": "fine", "protocol": "acp", "argv": []string{"/bin/sh"}}, nil)
}
