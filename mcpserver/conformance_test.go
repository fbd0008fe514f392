package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk/mcpserver"
	"github.com/desk-runtime/desk/mcpserver/internal/conformance"
)

// The official MCP conformance suite (@modelcontextprotocol/conformance,
// pinned in .ci/run) against desk's real /mcp endpoint and against the
// fixture server built on the same transport. DESK_MCP_CONFORMANCE names
// the suite's executable (node_modules/.bin/conformance); without it the
// test is skipped. Every scenario that fails must be listed in
// testdata/conformance-baseline.txt with its reason, and every listed one
// must still fail.

// deskScenarios run against desk serve's own /mcp: the lifecycle,
// protocol-version negotiation, transport/session and DNS-rebinding
// scenarios, and the listings, whose shapes desk's own tools, prompts and
// resources must satisfy. The others need the suite's fixtures.
var deskScenarios = []string{
	"server-initialize", "ping", "logging-set-level", "server-sse-multiple-streams", "dns-rebinding-protection",
	"tools-list", "prompts-list", "resources-list", "completion-complete",
}

// deskStatelessScenarios run against desk serve's /mcp at the 2026-07-28
// wire (stateless: no initialize, no Mcp-Session-Id; the version and
// client info in each request's _meta and headers). server-stateless
// needs the suite's diagnostic tools (test_missing_capability, …), so it
// runs against the fixture server, on the same transport.
var deskStatelessScenarios = []string{
	"tools-list", "prompts-list", "resources-list", "completion-complete",
	"caching", "dns-rebinding-protection", "http-header-validation", "sep-2164-resource-not-found",
}

// deskTaskScenarios are the suite's Tasks-extension scenarios that can run
// against desk serve (the others call fixture tools of their own:
// slow_compute, greet, …).
var deskTaskScenarios = []string{"tasks-status-notifications"}

// statelessVersion is the revision the "@2026-07-28" targets run at.
const statelessVersion = "2026-07-28"

func TestConformance(t *testing.T) {
	bin := os.Getenv("DESK_MCP_CONFORMANCE")
	if bin == "" {
		t.Skip("DESK_MCP_CONFORMANCE is not set: .ci/run installs the pinned @modelcontextprotocol/conformance and sets it")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("DESK_MCP_CONFORMANCE=%s: %v", bin, err)
	}
	baseline := readBaseline(t, "testdata/conformance-baseline.txt")

	// desk, behind a proxy that adds the bearer token the suite cannot send
	// (keeping Host and Origin, which the DNS-rebinding scenario varies).
	w := newWorld(t)
	deskURL := tokenProxy(t, w.env.Server.URL, w.tokA) + mcpserver.Path

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const fixtureToken = "conformance-fixture-token"
	fh, closeSessions := conformance.Handler(ctx, fixtureToken, nil)
	fx := httptest.NewServer(fh)
	defer fx.Close()
	defer closeSessions()
	fixtureURL := tokenProxy(t, fx.URL, fixtureToken) + "/mcp"

	results := map[string]bool{} // "target scenario" → passed
	for _, sc := range deskScenarios {
		results["desk "+sc] = runScenario(t, bin, deskURL, sc)
	}
	for _, sc := range deskStatelessScenarios {
		results["desk@"+statelessVersion+" "+sc] = runScenario(t, bin, deskURL, sc, "--spec-version", statelessVersion)
	}
	for _, sc := range deskTaskScenarios {
		results["desk@tasks "+sc] = runScenario(t, bin, deskURL, sc)
	}
	for _, sc := range activeScenarios(t, bin) {
		results["fixture "+sc] = runScenario(t, bin, fixtureURL, sc)
	}
	for _, sc := range requiredScenarios(t, bin, statelessVersion) {
		results["fixture@"+statelessVersion+" "+sc] = runScenario(t, bin, fixtureURL, sc, "--spec-version", statelessVersion)
	}
	passed := 0
	var names []string
	for k := range results {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		reason, expected := baseline[k]
		switch ok := results[k]; {
		case ok:
			passed++
			if expected {
				t.Errorf("%s passes but the baseline expects it to fail (%s): remove it from the baseline", k, reason)
			}
		case !expected:
			t.Errorf("%s fails and is not in the baseline", k)
		default:
			t.Logf("%s fails as the baseline expects: %s", k, reason)
		}
	}
	for k := range baseline {
		if _, ran := results[k]; !ran {
			t.Errorf("baseline entry %q names no scenario that ran", k)
		}
	}
	// The line .ci/run prints.
	nDesk := len(deskScenarios) + len(deskStatelessScenarios) + len(deskTaskScenarios)
	fmt.Printf("MCP conformance: %d of %d scenarios pass (%d against desk serve, %d against the fixture server); %d expected failures in the baseline\n",
		passed, len(results), nDesk, len(results)-nDesk, len(baseline))
}

// readBaseline reads "target scenario: reason" lines; # starts a comment.
func readBaseline(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, reason, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(reason) == "" || len(strings.Fields(k)) != 2 {
			t.Fatalf("%s: %q is not \"target scenario: reason\"", path, line)
		}
		out[strings.Join(strings.Fields(k), " ")] = strings.TrimSpace(reason)
	}
	return out
}

// tokenProxy is a loopback reverse proxy to target that adds the token,
// as an MCP host configured with a header does.
func tokenProxy(t *testing.T, target, token string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1, // SSE streams pass at once
	}
	s := httptest.NewServer(p)
	t.Cleanup(s.Close)
	return s.URL
}

// requiredScenarios lists the server scenarios the suite requires of a
// revision (frozen at its release).
func requiredScenarios(t *testing.T, bin, version string) []string {
	t.Helper()
	var server []string
	for _, sc := range listScenarios(t, bin, "--requirements", version) {
		// The listing goes on with the client scenarios after the server ones.
		if strings.Contains(sc, "/") || sc == "tools_call" || sc == "request-metadata" {
			break
		}
		server = append(server, sc)
	}
	return server
}

// activeScenarios lists every server scenario of the suite, the pending
// ones included, but not the extensions' (tasks, skills), which the
// fixture does not implement.
func activeScenarios(t *testing.T, bin string) []string {
	return listScenarios(t, bin)
}

// conformanceCmd runs the suite with the Node next to it first on PATH
// (the pinned node package, Node 22, installed in the same
// node_modules/.bin), since the suite needs Node 22 and the machine's is 20.
func conformanceCmd(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	return cmd
}

// listScenarios lists server scenarios (extra narrows the list).
func listScenarios(t *testing.T, bin string, extra ...string) []string {
	t.Helper()
	out, err := conformanceCmd(context.Background(), bin, append([]string{"list", "--server"}, extra...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	var all []string
	for _, line := range strings.Split(string(out), "\n") {
		// "- name" (0.1.13) or "- name [spec versions]" (0.1.16).
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok && len(strings.Fields(s)) > 0 {
			f := strings.Fields(s)
			if len(f) > 1 && f[1] == "[extension]" {
				continue
			}
			all = append(all, f[0])
		}
	}
	if len(all) == 0 {
		t.Fatalf("conformance list printed no scenarios:\n%s", out)
	}
	return all
}

// runScenario runs one scenario and reports whether every check passed (a
// warning counts as a failure, as the suite's own baseline check does).
func runScenario(t *testing.T, bin, target, scenario string, extra ...string) bool {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := conformanceCmd(ctx, bin, append([]string{"server", "--url", target, "--scenario", scenario, "-o", dir}, extra...)...)
	out, _ := cmd.CombinedOutput()
	var checks []struct {
		Name, Status, ErrorMessage string
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	if len(files) == 0 {
		files, _ = filepath.Glob(filepath.Join(dir, "*", "*", "checks.json"))
	}
	if len(files) != 1 {
		t.Logf("%s: no checks.json (exit %v):\n%s", scenario, cmd.ProcessState, out)
		return false
	}
	b, err := os.ReadFile(files[0])
	if err != nil || json.Unmarshal(b, &checks) != nil || len(checks) == 0 {
		t.Logf("%s: unreadable checks %s: %v", scenario, files[0], err)
		return false
	}
	ok := true
	for _, c := range checks {
		if c.Status == "FAILURE" || c.Status == "WARNING" {
			ok = false
			t.Logf("%s against %s: %s %s: %s", scenario, target, c.Status, c.Name, c.ErrorMessage)
		}
	}
	return ok
}
