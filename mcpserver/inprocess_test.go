package mcpserver

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHandlerTransportStreamsAndStops(t *testing.T) {
	t.Parallel()
	stopped := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(stopped)
		if r.Header.Get("Authorization") != "Bearer tok" || r.URL.Query().Get("q") != "1" {
			http.Error(w, "bad request copy", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done() // a live stream: ends when the caller goes
	})
	c := &http.Client{Transport: handlerTransport{h: h, logger: slog.New(slog.DiscardHandler)}}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://desk.in-process/v1/events?q=1", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d header %v", resp.StatusCode, resp.Header)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("read %q %v while the handler still runs", line, err)
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("cancelling the request did not stop the handler")
	}
	resp.Body.Close()
}

func TestHandlerTransportSurvivesAPanic(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })
	c := &http.Client{Transport: handlerTransport{h: h, logger: slog.New(slog.DiscardHandler)}}
	resp, err := c.Post("http://desk.in-process/x", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", resp.StatusCode)
	}
}
