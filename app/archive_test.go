package app_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/archive"
)

// TestArchiveOverHTTP appends records through the service and reads them
// back through the API: byte for byte, in order, filtered, with the days.
func TestArchiveOverHTTP(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	origin := &desk.Origin{WorkspaceID: w.ws.ID, SessionID: w.a.ID, Actor: desk.AdminActor, Kind: desk.OriginUser}
	day1 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	recs := []archive.Record{
		&archive.MessageInbound{Envelope: archive.Envelope{At: day1, Channel: "http", ConversationID: w.a.ID, Origin: origin}, Text: "hello"},
		&archive.MessageOutboundRuntime{Envelope: archive.Envelope{At: day1.Add(time.Second), Channel: "http", ConversationID: w.a.ID, Origin: origin}, Status: "completed", Reply: "hi there"},
		&archive.MessageInbound{Envelope: archive.Envelope{At: day1.Add(24 * time.Hour), Channel: "feishu", ConversationID: "oc/1 2", Origin: origin}, Text: "next day"},
	}
	for _, r := range recs {
		if err := w.App.Archive.Append(t.Context(), w.ws.ID, r); err != nil {
			t.Fatal(err)
		}
	}
	r := w.Admin("GET", "/v1/workspaces/"+w.ws.ID+"/archive", nil)
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("archive = %d %s", r.Status, r.Header)
	}
	lines := strings.Split(strings.TrimSuffix(string(r.Body), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %s", len(lines), r.Body)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first["event_type"] != "message_inbound" || first["text"] != "hello" || first["schema_version"] != float64(1) {
		t.Fatalf("first record: %v", first)
	}
	// Envelope fields come first, in the contract's order.
	if !strings.HasPrefix(lines[0], `{"schema_version":1,"at":`) {
		t.Fatalf("envelope order: %s", lines[0])
	}
	r = w.Admin("GET", "/v1/workspaces/"+w.ws.ID+"/archive?channel=feishu&conversation=oc/1%202", nil)
	if n := bytes.Count(r.Body, []byte("\n")); n != 1 || !bytes.Contains(r.Body, []byte("next day")) {
		t.Fatalf("filtered: %s", r.Body)
	}
	r = w.Admin("GET", "/v1/workspaces/"+w.ws.ID+"/archive?from=2026-03-15", nil)
	if n := bytes.Count(r.Body, []byte("\n")); n != 1 {
		t.Fatalf("from filter: %s", r.Body)
	}
	var days struct {
		Days  []string
		Files []archive.FileInfo
	}
	w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/archive/days", nil, &days)
	if strings.Join(days.Days, ",") != "2026-03-14,2026-03-15" || len(days.Files) != 2 {
		t.Fatalf("days: %+v", days)
	}
	for _, f := range days.Files {
		if f.Channel == "feishu" && f.Conversation != "oc/1 2" {
			t.Fatalf("decoded conversation %q", f.Conversation)
		}
	}
	if r := w.Admin("GET", "/v1/workspaces/"+w.ws.ID+"/archive?from=yesterday", nil); r.Status != 400 {
		t.Fatalf("bad from = %d", r.Status)
	}
	// A crash fragment at the end of a file is skipped, never served.
	sc := bufio.NewScanner(bytes.NewReader(w.Admin("GET", "/v1/workspaces/"+w.ws.ID+"/archive", nil).Body))
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("invalid line served: %s", sc.Text())
		}
	}
}
