package sse

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// TestStreams: Shutdown ends every open stream's context and refuses new
// streams; Close waits for the streams (and what they run beside them)
// until its context ends, and is idempotent.
func TestStreams(t *testing.T) {
	h := NewStreams()
	r := httptest.NewRequest("GET", "/v1/events", nil)
	ctx, end, err := h.Begin(r)
	if err != nil {
		t.Fatal(err)
	}
	kept := make(chan struct{})
	wait := h.Go(func() { <-ctx.Done(); close(kept) })
	if ctx.Err() != nil {
		t.Fatal("a fresh stream's context is done")
	}
	h.Shutdown()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not end the stream's context")
	}
	if _, _, err := h.Begin(r); !desk.IsCode(err, desk.EUNAVAILABLE) {
		t.Fatalf("Begin after Shutdown = %v, want unavailable", err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := h.Close(short); err == nil {
		t.Fatal("Close returned before the open stream ended")
	}
	wait()
	<-kept
	end()
	end() // twice is harmless
	for range 2 {
		if err := h.Close(context.Background()); err != nil {
			t.Fatalf("Close after the stream ended: %v", err)
		}
	}
}
