package gateway_test

// The gateway against the strict provider servers as the operator's
// upstream: what a runtime child's client sends reaches the provider with
// the operator's key (never the child's credential), the answer comes back
// as the provider sent it, and the usage lands in desk's store, where the
// workspace's sums (and so its token budget) count it.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/gateway"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
	"github.com/desk-runtime/desk/models"
	"github.com/desk-runtime/desk/store/sqlite"
)

const (
	realOpenAI    = "sk-operator-openai-0123456789"
	realAnthropic = "sk-ant-operator-0123456789"
)

type fixture struct {
	store desk.Store
	g     *gateway.Gateway
	turn  gateway.Turn
	env   map[string]string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.OpenWith(ctx, filepath.Join(dir, "desk.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{store: st, env: map[string]string{"OPENAI_API_KEY": realOpenAI, "ANTHROPIC_API_KEY": realAnthropic},
		turn: gateway.Turn{WorkspaceID: "wsp_1", SessionID: "ses_1", SurfaceID: "srf_1", ExecutionID: "exe_1", ActorID: "act_1", Runtime: "rt"}}
	// The operator offers these models; the tests call them (and, as
	// attackers, others).
	catalog, err := models.New("", []string{"openai:gpt-test", "anthropic:claude-test", "openai-compatible:http://127.0.0.1:1/v1#gpt-other"})
	if err != nil {
		t.Fatal(err)
	}
	f.g = gateway.New(gateway.Options{Usage: st, Dir: filepath.Join(dir, "gw"), Models: catalog, LookupEnv: func(k string) (string, bool) {
		v, ok := f.env[k]
		return v, ok
	}})
	if err := f.g.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.g.Close(ctx) })
	return f
}

func (f *fixture) endpoint(t *testing.T, l gateway.Listen) *gateway.Endpoint {
	t.Helper()
	e, err := f.g.NewEndpoint(f.turn, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func post(t *testing.T, c *http.Client, url, cred, header, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	switch header {
	case "bearer":
		req.Header.Set("Authorization", "Bearer "+cred)
	case "x-api-key":
		req.Header.Set("x-api-key", cred)
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(b)
}

func (f *fixture) sum(t *testing.T) desk.UsageTotals {
	t.Helper()
	s, err := f.store.SumUsage(context.Background(), desk.UsageFilter{SessionID: f.turn.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	return s.Total
}

func TestResponsesForwardedWithTheOperatorsKey(t *testing.T) {
	t.Parallel()
	f := setup(t)
	srv := strict.NewResponses(t,
		strict.Reply{Text: "streamed answer", Usage: strict.Usage{Input: 120, Output: 7, Cached: 20}},
		strict.Reply{Text: "whole answer", Usage: strict.Usage{Input: 30, Output: 5}})
	srv.RequireKey(realOpenAI)
	f.env["OPENAI_BASE_URL"] = srv.BaseURL()
	e := f.endpoint(t, gateway.HostLoopback)
	base := e.Env(e.Addr())["OPENAI_BASE_URL"]

	res, body := post(t, http.DefaultClient, base+"/responses", e.Credential(), "bearer",
		`{"model":"gpt-test","stream":true,"input":[{"role":"user","content":"hi"}]}`)
	if res.StatusCode != 200 || !strings.Contains(body, "response.completed") || !strings.Contains(body, "streamed answer") {
		t.Fatalf("streamed: %d %s", res.StatusCode, body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	res, body = post(t, http.DefaultClient, base+"/responses", e.Credential(), "bearer",
		`{"model":"gpt-test","input":"hello"}`)
	if res.StatusCode != 200 || !strings.Contains(body, "whole answer") {
		t.Fatalf("whole: %d %s", res.StatusCode, body)
	}
	if rj := srv.Rejected(); len(rj) > 0 {
		t.Fatalf("the provider refused: %+v", rj[0].Error)
	}
	for _, r := range srv.Requests() {
		if got := r.Header.Get("Authorization"); got != "Bearer "+realOpenAI {
			t.Fatalf("the provider got Authorization %q", got)
		}
		if strings.Contains(strings.Join(flatten(r.Header), " "), e.Credential()) {
			t.Fatal("the child's credential reached the provider")
		}
	}
	got := f.sum(t)
	if got.Calls != 2 || got.InputTokens != 150 || got.OutputTokens != 12 || got.CachedTokens != 20 {
		t.Fatalf("usage %+v", got)
	}
	s, _ := f.store.SumUsage(context.Background(), desk.UsageFilter{ExecutionID: "exe_1"})
	if len(s.Models) != 1 || s.Models[0].Model != "openai:gpt-test" {
		t.Fatalf("per model %+v", s.Models)
	}
}

func flatten(h http.Header) []string {
	var out []string
	for k, vs := range h {
		out = append(out, k+": "+strings.Join(vs, ","))
	}
	return out
}

func TestChatCompletionsStreamCountsItsUsage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	srv := strict.NewOpenAI(t, strict.Reply{Text: "chat answer", Usage: strict.Usage{Input: 40, Output: 9, Cached: 8}})
	srv.RequireKey(realOpenAI)
	f.env["OPENAI_BASE_URL"] = srv.BaseURL()
	e := f.endpoint(t, gateway.HostLoopback)
	// The client did not ask for usage; the gateway does, so the call
	// counts.
	res, body := post(t, http.DefaultClient, e.Env(e.Addr())["OPENAI_BASE_URL"]+"/chat/completions", e.Credential(), "bearer",
		`{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if res.StatusCode != 200 || !strings.Contains(body, `"chat an"`) || !strings.Contains(body, "[DONE]") {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	if rj := srv.Rejected(); len(rj) > 0 {
		t.Fatalf("the provider refused: %s", rj[0].Error)
	}
	if got := f.sum(t); got.Calls != 1 || got.InputTokens != 40 || got.OutputTokens != 9 || got.CachedTokens != 8 {
		t.Fatalf("usage %+v", got)
	}
}

func TestAnthropicMessagesOverTheUnixSocket(t *testing.T) {
	t.Parallel()
	f := setup(t)
	srv := strict.NewAnthropic(t, strict.Reply{Text: "claude answer", Usage: strict.Usage{Input: 500, Output: 11, Cached: 300}})
	srv.RequireKey(realAnthropic)
	f.env["ANTHROPIC_BASE_URL"] = srv.BaseURL()
	e := f.endpoint(t, gateway.UnixSocket)
	sock := filepath.Join(e.SocketDir(), gateway.SocketName)
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	base := e.Env("127.0.0.1:1")["ANTHROPIC_BASE_URL"]
	res, body := post(t, c, base+"/v1/messages?beta=true", e.Credential(), "x-api-key",
		`{"model":"claude-test","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if res.StatusCode != 200 || !strings.Contains(body, "message_delta") || !strings.Contains(body, `"claude "`) {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	res, body = post(t, c, base+"/v1/messages/count_tokens", e.Credential(), "x-api-key",
		`{"model":"claude-test","messages":[{"role":"user","content":"hi"}]}`)
	if res.StatusCode != 200 || !strings.Contains(body, "input_tokens") {
		t.Fatalf("count_tokens: %d %s", res.StatusCode, body)
	}
	if rj := srv.Rejected(); len(rj) > 0 {
		t.Fatalf("the provider refused: %s", rj[0].Error)
	}
	for _, r := range srv.Requests() {
		if r.Header.Get("X-Api-Key") != realAnthropic {
			t.Fatalf("the provider got x-api-key %q", r.Header.Get("X-Api-Key"))
		}
	}
	// count_tokens is free: one call, input counting the cache.
	if got := f.sum(t); got.Calls != 1 || got.InputTokens != 500 || got.OutputTokens != 11 || got.CachedTokens != 300 {
		t.Fatalf("usage %+v", got)
	}
}

// Attack: a runtime (or the agent inside it, which can write its config)
// asks for a model the operator did not declare, or names none, or names
// a model another provider's entry declares: the operator's key is never
// spent on it. The answer is a 400 in the provider's error shape naming
// the models offered; nothing reaches the provider and no usage is
// recorded.
func TestGatewayRefusesUndeclaredModels(t *testing.T) {
	t.Parallel()
	f := setup(t)
	oa := strict.NewResponses(t, strict.Reply{Text: "declared", Usage: strict.Usage{Input: 10, Output: 1}})
	oa.RequireKey(realOpenAI)
	an := strict.NewAnthropic(t)
	an.RequireKey(realAnthropic)
	f.env["OPENAI_BASE_URL"], f.env["ANTHROPIC_BASE_URL"] = oa.BaseURL(), an.BaseURL()
	e := f.endpoint(t, gateway.HostLoopback)
	env := e.Env(e.Addr())
	for _, c := range []struct{ name, url, header, body, want string }{
		{"undeclared openai model", env["OPENAI_BASE_URL"] + "/responses", "bearer", `{"model":"gpt-5-pro","input":"hi"}`, `model \"gpt-5-pro\" is not offered by this desk; its openai models are: gpt-test`},
		{"openai-compatible name on openai", env["OPENAI_BASE_URL"] + "/chat/completions", "bearer", `{"model":"gpt-other","messages":[{"role":"user","content":"hi"}]}`, `model \"gpt-other\" is not offered`},
		{"no model", env["OPENAI_BASE_URL"] + "/responses", "bearer", `{"input":"hi"}`, "the request names no model"},
		{"not JSON", env["OPENAI_BASE_URL"] + "/responses", "bearer", `model=gpt-test`, "the request names no model"},
		{"undeclared anthropic model", env["ANTHROPIC_BASE_URL"] + "/v1/messages", "x-api-key", `{"model":"claude-opus-4-1","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "its anthropic models are: claude-test"},
		{"openai name on anthropic", env["ANTHROPIC_BASE_URL"] + "/v1/messages", "x-api-key", `{"model":"gpt-test","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, `model \"gpt-test\" is not offered`},
		{"count_tokens of an undeclared model", env["ANTHROPIC_BASE_URL"] + "/v1/messages/count_tokens", "x-api-key", `{"model":"claude-opus-4-1","messages":[{"role":"user","content":"hi"}]}`, "is not offered"},
	} {
		res, body := post(t, http.DefaultClient, c.url, e.Credential(), c.header, c.body)
		var shape struct {
			Error struct{ Type, Message string }
		}
		if res.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &shape) != nil || shape.Error.Type != "invalid_request_error" || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 400 invalid_request_error containing %s", c.name, res.StatusCode, body, c.want)
		}
	}
	if n := len(oa.Requests()) + len(an.Requests()); n != 0 {
		t.Fatalf("%d refused calls reached a provider", n)
	}
	if got := f.sum(t); got.Calls != 0 {
		t.Fatalf("refused calls recorded usage: %+v", got)
	}
	// The declared model still goes through on the same endpoint.
	if res, body := post(t, http.DefaultClient, env["OPENAI_BASE_URL"]+"/responses", e.Credential(), "bearer", `{"model":"gpt-test","input":"hi"}`); res.StatusCode != 200 || !strings.Contains(body, "declared") {
		t.Fatalf("declared model: %d %s", res.StatusCode, body)
	}
}

// A gateway the operator gave no catalog spends the key on nothing.
func TestGatewayWithoutCatalogRefusesEveryModel(t *testing.T) {
	t.Parallel()
	srv := strict.NewResponses(t)
	g := gateway.New(gateway.Options{LookupEnv: func(k string) (string, bool) {
		return map[string]string{"OPENAI_API_KEY": realOpenAI, "OPENAI_BASE_URL": srv.BaseURL()}[k], true
	}})
	if err := g.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	e, err := g.NewEndpoint(gateway.Turn{SessionID: "ses_1"}, gateway.HostLoopback)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	res, body := post(t, http.DefaultClient, e.Env(e.Addr())["OPENAI_BASE_URL"]+"/responses", e.Credential(), "bearer", `{"model":"gpt-test","input":"hi"}`)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "declared no openai models") || len(srv.Requests()) != 0 {
		t.Fatalf("%d %s (%d reached the provider)", res.StatusCode, body, len(srv.Requests()))
	}
}

// Attack: another child's credential, a stale one (of a child that
// restarted), none, and a request naming another host: the provider
// receives nothing, and no other server either.
func TestGatewayRefusesForeignCredentialsAndHosts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	srv := strict.NewResponses(t)
	f.env["OPENAI_BASE_URL"] = srv.BaseURL()
	var elsewhere atomic.Int64
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(evil.Close)

	mine := f.endpoint(t, gateway.HostLoopback)
	other := f.endpoint(t, gateway.HostLoopback)
	stale, err := f.g.NewEndpoint(f.turn, gateway.HostLoopback)
	if err != nil {
		t.Fatal(err)
	}
	staleCred := stale.Credential()
	stale.Close()
	url := mine.Env(mine.Addr())["OPENAI_BASE_URL"] + "/responses"
	body := `{"model":"gpt-test","input":"hi"}`
	for name, cred := range map[string]string{"another child's": other.Credential(), "a stale": staleCred, "no": "", "a prefix of the": mine.Credential()[:20]} {
		for _, h := range []string{"bearer", "x-api-key"} {
			if res, b := post(t, http.DefaultClient, url, cred, h, body); res.StatusCode != 401 {
				t.Fatalf("%s credential (%s): %d %s", name, h, res.StatusCode, b)
			}
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the provider received %d requests from refused calls", n)
	}
	// The child names another host (Host header, absolute request URI,
	// forwarding headers): the operator's base URL is used all the same.
	conn, err := net.Dial("tcp", mine.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	evilHost := strings.TrimPrefix(evil.URL, "http://")
	req := "POST " + evil.URL + "/v1/responses HTTP/1.1\r\nHost: " + evilHost + "\r\nX-Forwarded-Host: " + evilHost +
		"\r\nAuthorization: Bearer " + mine.Credential() + "\r\nContent-Type: application/json\r\nContent-Length: " +
		itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if elsewhere.Load() != 0 {
		t.Fatal("the gateway forwarded to a host the child named")
	}
	if n := len(srv.Requests()); n != 1 || res.StatusCode != 200 {
		t.Fatalf("the operator's provider got %d requests (status %d)", n, res.StatusCode)
	}
	// A path outside the three APIs goes nowhere.
	req2, _ := http.NewRequest("GET", "http://"+mine.Addr()+"/v1/files", nil)
	req2.Header.Set("Authorization", "Bearer "+mine.Credential())
	r2, err := http.DefaultClient.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 404 || len(srv.Requests()) != 1 {
		t.Fatalf("GET /v1/files: %d, provider requests %d", r2.StatusCode, len(srv.Requests()))
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// An unreachable provider is a 502 naming it, and the endpoint reports
// the failure (the runtime host fails the turn with it); a provider's
// error body loses the key before the child or a reason sees it.
func TestUpstreamFailuresAreNamed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	f.env["OPENAI_BASE_URL"] = down
	e := f.endpoint(t, gateway.HostLoopback)
	url := e.Env(e.Addr())["OPENAI_BASE_URL"] + "/responses"
	res, body := post(t, http.DefaultClient, url, e.Credential(), "bearer", `{"model":"gpt-test","input":"hi"}`)
	if res.StatusCode != 502 || !strings.Contains(body, "cannot reach the provider at http://"+ln.Addr().String()) {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	_, why, ok := e.Failing()
	if !ok || !strings.Contains(why, "cannot reach the provider") {
		t.Fatalf("failing %v %q", ok, why)
	}
	// A provider that echoes the key in its error.
	leak := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		io.WriteString(w, `{"error":{"type":"invalid_api_key","message":"Incorrect API key provided: `+realOpenAI+`"}}`)
	}))
	t.Cleanup(leak.Close)
	f.env["OPENAI_BASE_URL"] = leak.URL + "/v1"
	res, body = post(t, http.DefaultClient, url, e.Credential(), "bearer", `{"model":"gpt-test","input":"hi"}`)
	if res.StatusCode != 401 || strings.Contains(body, realOpenAI) || !strings.Contains(body, "Incorrect API key") {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	_, why, _ = e.Failing()
	if strings.Contains(why, realOpenAI) || !strings.Contains(why, "answered 401") || !strings.Contains(why, "invalid_api_key") {
		t.Fatalf("reason %q", why)
	}
	// No key configured: named.
	delete(f.env, "OPENAI_API_KEY")
	res, body = post(t, http.DefaultClient, url, e.Credential(), "bearer", `{"model":"gpt-test","input":"hi"}`)
	if res.StatusCode != 503 || !strings.Contains(body, "OPENAI_API_KEY") {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	if got := f.sum(t); got.Calls != 0 {
		t.Fatalf("failed calls recorded usage: %+v", got)
	}
}

func TestRefusedNames(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_COMPATIBLE_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"} {
		if why, ok := gateway.Refused(n); !ok || !strings.Contains(why, n) {
			t.Fatalf("%s not refused (%q)", n, why)
		}
	}
	if _, ok := gateway.Refused("HTTPS_PROXY"); ok {
		t.Fatal("an ordinary variable refused")
	}
}

// The bridge (this test binary in bridge mode, as desk is in a sandbox)
// carries a connection on its loopback port to the endpoint's socket,
// runs its program with the same standard streams, and exits with its
// status.
func TestBridgeCarriesTheChildsCalls(t *testing.T) {
	t.Parallel()
	f := setup(t)
	srv := strict.NewResponses(t, strict.Reply{Text: "bridged", Usage: strict.Usage{Input: 3, Output: 2}})
	f.env["OPENAI_BASE_URL"] = srv.BaseURL()
	e := f.endpoint(t, gateway.UnixSocket)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The program asks through the bridge with the shell's /dev/tcp-less
	// tools: the test itself is the client, and the program waits for
	// its stdin to close.
	cmd := exec.Command(exe, gateway.BridgeArg, "--listen", addr, "--socket", filepath.Join(e.SocketDir(), gateway.SocketName), "--",
		"/bin/sh", "-c", "read line; echo got-$line; exit 7")
	in, _ := cmd.StdinPipe()
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var res *http.Response
	var body string
	for i := 0; ; i++ {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/responses", strings.NewReader(`{"model":"gpt-test","input":"hi"}`))
		req.Header.Set("Authorization", "Bearer "+e.Credential())
		req.Header.Set("Content-Type", "application/json")
		r, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			res, body = r, string(b)
			break
		}
		if i > 200 {
			t.Fatalf("the bridge never listened: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res.StatusCode != 200 || !strings.Contains(body, "bridged") {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	io.WriteString(in, "hello\n")
	in.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 || strings.TrimSpace(out.String()) != "got-hello" {
		t.Fatalf("bridge ended %v, stdout %q", err, out.String())
	}
}

// holdGatewayEnv makes TestHelperHoldGateway, run as a child process, open
// a gateway on the directory it names, print its socket directory and wait
// to be killed.
const holdGatewayEnv = "DESK_GATEWAY_TEST_HOLD"

func TestHelperHoldGateway(t *testing.T) {
	dir := os.Getenv(holdGatewayEnv)
	if dir == "" {
		t.Skip("a child process of TestKilledGatewaysSocketDirectoriesAreSwept")
	}
	g := gateway.New(gateway.Options{Dir: dir})
	if err := g.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	e, err := g.NewEndpoint(gateway.Turn{SessionID: "ses_1"}, gateway.UnixSocket)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString(filepath.Dir(e.SocketDir()) + "\n")
	select {}
}

// A desk killed with -9 leaves its gateway's socket directory (and the
// sockets in it) behind; the next desk on the same home removes it, and
// leaves a live peer's alone.
func TestKilledGatewaysSocketDirectoriesAreSwept(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "gw")
	ctx := context.Background()
	live := gateway.New(gateway.Options{Dir: dir})
	if err := live.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Close(ctx) })
	le, err := live.NewEndpoint(gateway.Turn{SessionID: "ses_live"}, gateway.UnixSocket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(le.Close)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestHelperHoldGateway$")
	cmd.Env = append(os.Environ(), holdGatewayEnv+"="+dir)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("the child printed no socket directory: %v", err)
	}
	dead := strings.TrimSpace(line)
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := os.Stat(dead); err != nil {
		t.Fatalf("the killed gateway's directory is not there to sweep: %v", err)
	}
	next := gateway.New(gateway.Options{Dir: dir})
	if err := next.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close(ctx) })
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed gateway's socket directory %s was left: %v", dead, err)
	}
	if _, err := os.Stat(filepath.Join(le.SocketDir(), gateway.SocketName)); err != nil {
		t.Fatalf("the live gateway's socket was removed: %v", err)
	}
}
