package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
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
	t.Parallel()
	d := startDesk(t, deskOpts{})
	url := d.URL
	type ended struct {
		path string
		err  error
	}
	admin := d.Token
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
	// Each stream answered 200: its handler flushed its headers and is
	// inside its loop.
	start := time.Now()
	if err := d.Exit(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("desk exited %v after SIGTERM with streams open; want within 10 s (the shutdown grace is 30 s)", el)
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
