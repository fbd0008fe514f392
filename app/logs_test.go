package app_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
)

func TestAppLogOverHTTP(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	log := w.App.Logger
	secret := "sk-ant-api03-" + strings.Repeat("x", 40)
	log.Info("calling provider", "component", "agent", "apiKey", secret, "path", "/home/me/project/main.go")
	log.Warn("upstream refused", "component", "agent", "header", "Authorization: Bearer "+w.Token)
	log.Error("cookie leak attempt", "component", "http", "Cookie", "session=abcdef123456")
	w.App.Logs.Flush(t.Context())

	var list struct {
		Entries []desk.LogEntry
		LastSeq int64 `json:"last_seq"`
	}
	w.Must(200, "GET", "/v1/logs?source=agent,http&limit=50", nil, &list)
	if len(list.Entries) != 3 {
		t.Fatalf("entries = %d: %+v", len(list.Entries), list.Entries)
	}
	raw := w.Admin("GET", "/v1/logs?limit=1000", nil).Body
	for _, leak := range []string{secret, w.Token, "abcdef123456"} {
		if strings.Contains(string(raw), leak) {
			t.Fatalf("secret %q reached the log API", leak)
		}
	}
	if !strings.Contains(string(raw), "/home/me/project/main.go") {
		t.Fatal("an ordinary path was redacted")
	}
	// Level filter and unread counts: info never counts.
	w.Must(200, "GET", "/v1/logs?level=error", nil, &list)
	if len(list.Entries) < 1 || list.Entries[0].Level != "error" {
		t.Fatalf("level filter: %+v", list.Entries)
	}
	var u desk.LogUnread
	w.Must(200, "GET", "/v1/logs/unread", nil, &u)
	if u.Counts["warn"] < 1 || u.Counts["error"] < 1 {
		t.Fatalf("unread = %+v", u)
	}
	w.Must(200, "POST", "/v1/logs/seen", map[string]int64{"seq": u.LastSeq}, &u)
	if u.Counts["warn"] != 0 || u.Counts["error"] != 0 || u.Seen != u.LastSeq {
		t.Fatalf("after seen: %+v", u)
	}
	// The live tail resumes after Last-Event-ID and carries no secret.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", w.Server.URL+"/v1/logs/stream?source=agent", nil)
	req.Header.Set("Authorization", "Bearer "+w.Token)
	req.Header.Set("Last-Event-ID", "0")
	resp, err := w.Server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	go func() {
		time.Sleep(100 * time.Millisecond)
		log.Warn("live one", "component", "agent", "password", "hunter2hunter2")
	}()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "hunter2hunter2") {
			t.Fatal("password reached the live stream")
		}
		if strings.HasPrefix(line, "data:") && strings.Contains(line, "live one") {
			break
		}
	}
	if ctx.Err() != nil {
		t.Fatal("live entry never arrived")
	}
	// Actor tokens do not read the operator log.
	var bob struct{ Token string }
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": "bob", "kind": "agent"}, &bob)
	if r := w.Req("GET", "/v1/logs", bob.Token, nil); r.Status != 403 {
		t.Fatalf("actor reads the log = %d", r.Status)
	}
}
