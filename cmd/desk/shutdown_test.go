package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestShutdownEndsOpenStreams: with the API's event stream and app log
// tail and the web UI's page and log streams open, desk exits promptly on
// SIGTERM (it used to wait the whole 30 s
// grace for them), and each stream ends cleanly — the chunked body is
// terminated, not cut.
func TestShutdownEndsOpenStreams(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	cmd, url, lines := startServe(t, home)
	go func() {
		for range lines {
		}
	}()
	tok, err := os.ReadFile(filepath.Join(home, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	type ended struct {
		path string
		err  error
	}
	admin := strings.TrimSpace(string(tok))
	req, _ := http.NewRequest("POST", url+"/v1/workspaces", strings.NewReader(`{"name":"streams"}`))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ws struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&ws); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create workspace = %d, %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	web := webSignIn(t, url, admin)
	paths := []string{"/v1/events", "/v1/logs/stream", "/w/" + ws.ID + "/stream", "/logs/stream"}
	results := make(chan ended, len(paths))
	for _, p := range paths {
		req, _ := http.NewRequest("GET", url+p, nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		req.AddCookie(web) // the web UI's sign-in
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("%s = %d", p, resp.StatusCode)
		}
		go func() {
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			for {
				if _, err := r.ReadString('\n'); err != nil {
					results <- ended{p, err}
					return
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // the handlers are inside their loops
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("desk did not exit within 10 s of SIGTERM with streams open (the shutdown grace is 30 s)")
	}
	t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	for range paths {
		select {
		case e := <-results:
			if !errors.Is(e.err, io.EOF) {
				t.Errorf("%s ended with %v, want a clean end of stream (EOF)", e.path, e.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a stream is still open after desk exited")
		}
	}
}
