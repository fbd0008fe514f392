package applog_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/desk-runtime/desk/applog"
)

var (
	deskToken  = "desk_" + strings.Repeat("abcdefgh23", 5) + "xy"
	adminToken = "deskadm_" + strings.Repeat("qrstuv4567", 5) + "ab"
	loginCode  = "desklink_" + strings.Repeat("mnopq23456", 5) + "cd"
	anthropic  = "sk-ant-api03-" + strings.Repeat("Ab9_x-", 15)
	openaiProj = "sk-proj-" + strings.Repeat("Zx81_", 20)
	openaiOld  = "sk-" + strings.Repeat("a1B2c3D4", 6)
	githubPAT  = "ghp_" + strings.Repeat("A1b2C3", 6)
	jwt        = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)

func TestRedactString(t *testing.T) {
	t.Parallel()
	r := applog.NewRedactor("correct-horse-battery", "p@ss word+1", "abc")
	for _, c := range []struct{ in, want string }{
		// Headers and bearer tokens.
		{"Authorization: Bearer abc.def-ghi_123", "Authorization: [REDACTED]"},
		{`"authorization":"Basic dXNlcjpwYXNz"`, `"authorization":"[REDACTED]"`},
		{"sent bearer Zm9vYmFyYmF6 to upstream", "sent bearer [REDACTED] to upstream"},
		{"Proxy-Authorization: Digest x", "Proxy-Authorization: [REDACTED]"},
		// Cookies, to the end of the line.
		{"Cookie: session=abc123; theme=dark", "Cookie: [REDACTED]"},
		{"Set-Cookie: id=a3fWa; Expires=Wed, 21 Oct 2015\nnext line", "Set-Cookie: [REDACTED]\nnext line"},
		// Sensitive keys in key=value, key: value and JSON text.
		{`{"password":"hunter2","user":"bob"}`, `{"password":"[REDACTED]","user":"bob"}`},
		{"db.password=hunter2 host=db", "db.password=[REDACTED] host=db"},
		{`body="{\"password\":\"hun ter2\",\"user\":\"bob\"}"`, `body="{\"password\":[REDACTED],\"user\":\"bob\"}"`},
		{`hdr="{\"Cookie\": \"a=b\"}"`, `hdr="{\"Cookie\": [REDACTED]`},
		{"x-api-key: abc123xyz", "x-api-key: [REDACTED]"},
		{"apiKey=k3y&page=2", "apiKey=[REDACTED]&page=2"},
		{"client_secret='s3'", "client_secret='[REDACTED]'"},
		{"GITHUB_TOKEN=abcdef", "GITHUB_TOKEN=[REDACTED]"},
		{"aws_secret_access_key = wJalrXUtnFEMI", "aws_secret_access_key = [REDACTED]"},
		// Credentials recognizable by shape.
		{"token " + deskToken + " used", "token [REDACTED] used"},
		{"admin " + adminToken, "admin [REDACTED]"},
		{"GET /login?code=" + loginCode + " 303", "GET /login?code=[REDACTED] 303"},
		{"key " + anthropic + " end", "key [REDACTED] end"},
		{"key " + openaiProj, "key [REDACTED]"},
		{"key " + openaiOld + ".", "key [REDACTED]."},
		{"aws AKIAIOSFODNN7EXAMPLE ok", "aws [REDACTED] ok"},
		{"gh " + githubPAT, "gh [REDACTED]"},
		{"jwt " + jwt, "jwt [REDACTED]"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIB\n-----END RSA PRIVATE KEY----- after", "[REDACTED] after"},
		// URL passwords; a user without a password stays.
		{"dial postgres://desk:hunter2@db:5432/desk failed", "dial postgres://desk:[REDACTED]@db:5432/desk failed"},
		{"fetch https://me@example.com/x", "fetch https://me@example.com/x"},
		// Configured secrets, also URL-encoded; too short ones are ignored.
		{"pw correct-horse-battery!", "pw [REDACTED]!"},
		{"q=p%40ss+word%2B1 and p@ss word+1", "q=[REDACTED] and [REDACTED]"},
		{"abc stays", "abc stays"},
		// Ordinary text stays readable.
		{"/home/me/project/file.go:12", "/home/me/project/file.go:12"},
		{"/home/me/sk-learn-experiments/secret_notes/train.py", "/home/me/sk-learn-experiments/secret_notes/train.py"},
		{"/srv/desk_data/workspaces/ws_01H/tokens.txt", "/srv/desk_data/workspaces/ws_01H/tokens.txt"},
		{"max_tokens=4096 prompt_tokens=12 token_count: 3", "max_tokens=4096 prompt_tokens=12 token_count: 3"},
		{"session ses_01HXYZ @calm-amber-river-a1b2c3 in ws_01HABC", "session ses_01HXYZ @calm-amber-river-a1b2c3 in ws_01HABC"},
		{"GET /v1/logs?after_seq=10&level=warn 200", "GET /v1/logs?after_seq=10&level=warn 200"},
	} {
		got := r.String(c.in)
		if got != c.want {
			t.Errorf("String(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
		if again := r.String(got); again != got {
			t.Errorf("redacting %q twice gave %q", got, again)
		}
	}
}

func TestSensitiveKey(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"password", "Password", "db.password", "passwd", "apiKey", "api_key", "X-Api-Key",
		"token", "access_token", "refreshToken", "secret", "client_secret", "Cookie", "Set-Cookie",
		"headers.cookie", "Authorization", "auth", "credentials", "private_key", "password.length"} {
		if !applog.SensitiveKey(k) {
			t.Errorf("SensitiveKey(%q) = false", k)
		}
	}
	for _, k := range []string{"path", "max_tokens", "tokens", "token_count", "session_id", "signature", "key",
		"idempotency_key", "author", "cookie_name", "secret_name", "workspace_id"} {
		if applog.SensitiveKey(k) {
			t.Errorf("SensitiveKey(%q) = true", k)
		}
	}
}

func TestRedactFields(t *testing.T) {
	t.Parallel()
	r := applog.NewRedactor("configured-secret-1")
	in := map[string]any{
		"apiKey":    "plain-looking-value",
		"password":  123456,
		"token":     "",
		"has_token": true,
		"path":      "/home/me/project/file.go",
		"headers": map[string]any{
			"Cookie": []any{"a=b"},
			"Accept": "text/plain",
		},
		"list":   []any{"Bearer abcdefgh", "note configured-secret-1", 7},
		"typed":  map[string]string{"Set-Cookie": "x=y", "ok": "fine"},
		"owners": map[string]any{deskToken: "alice"},
	}
	out := r.Fields(in)
	got := mustJSON(t, out)
	want := `{"apiKey":"[REDACTED]","has_token":true,"headers":{"Accept":"text/plain","Cookie":"[REDACTED]"},` +
		`"list":["Bearer [REDACTED]","note [REDACTED]",7],"owners":{"[REDACTED]":"alice"},"password":"[REDACTED]","path":"/home/me/project/file.go",` +
		`"token":"","typed":{"Set-Cookie":"[REDACTED]","ok":"fine"}}`
	if got != want {
		t.Fatalf("Fields\n got %s\nwant %s", got, want)
	}
	if in["apiKey"] != "plain-looking-value" {
		t.Fatalf("Fields changed its input")
	}
}

func TestRedactAttr(t *testing.T) {
	t.Parallel()
	r := applog.NewRedactor()
	var buf bytes.Buffer
	h := slog.NewTextHandler(&buf, nil)
	rec := slog.NewRecord(testTime, slog.LevelInfo, "m", 0)
	rec.AddAttrs(
		r.Attr(slog.String("password", "hunter2")),
		r.Attr(slog.Group("req", slog.String("Authorization", "Bearer xyz123"), slog.String("path", "/a/b"))),
		r.Attr(slog.Group("secret", slog.String("v", "inner"))),
		r.Attr(slog.Any("cfg", map[string]any{"apiKey": "v1", "n": 2})),
		r.Attr(slog.Int("count", 3)),
	)
	if err := h.Handle(ctx, rec); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, leak := range []string{"hunter2", "xyz123", "inner", "v1"} {
		if strings.Contains(out, leak) {
			t.Errorf("redacted attrs leak %q: %s", leak, out)
		}
	}
	for _, keep := range []string{"req.path=/a/b", "count=3", "n:2"} {
		if !strings.Contains(out, keep) {
			t.Errorf("redacted attrs lost %q: %s", keep, out)
		}
	}
}
