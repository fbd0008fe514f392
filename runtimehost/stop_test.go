package runtimehost_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// withMarker lists the host's processes whose command line holds marker.
func withMarker(t *testing.T, marker string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	must(t, err)
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), marker) {
			continue
		}
		st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := strings.LastIndexByte(string(st), ')'); i > 0 && strings.HasPrefix(string(st[i+1:]), " Z") {
			continue // a zombie is gone, only not reaped by its parent yet
		}
		out = append(out, e.Name()+" "+strings.ReplaceAll(string(b), "\x00", " "))
	}
	return out
}

// StopSession and StopWorkspace end a session's idle child (kept between
// turns) and return only once its process is gone; a stop for another
// session or workspace leaves it alone.
func TestStopEndsTheSessionsChild(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"session", "workspace"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			marker := "desk-stop-test-" + desk.NewID("m")
			f := setup(t, "/bin/sh", "-c", "cat; :", marker)
			h := f.host()
			ctx := context.Background()
			defer h.Close(ctx)
			if _, err := h.Execute(ctx, f.turn(&emitted{}, "one")); err != nil {
				t.Fatal(err)
			}
			if h.Running() != 1 || len(withMarker(t, marker)) == 0 {
				t.Fatalf("no idle child after the turn (%d)", h.Running())
			}
			other := &desk.Session{ID: desk.NewID(desk.PrefixSession), WorkspaceID: f.sess.WorkspaceID}
			must(t, h.StopSession(ctx, other))
			must(t, h.StopWorkspace(ctx, desk.NewID(desk.PrefixWorkspace)))
			if h.Running() != 1 || len(withMarker(t, marker)) == 0 {
				t.Fatal("a stop of another session or workspace ended this child")
			}
			if how == "session" {
				must(t, h.StopSession(ctx, f.sess))
			} else {
				must(t, h.StopWorkspace(ctx, f.sess.WorkspaceID))
			}
			if h.Running() != 0 {
				t.Fatalf("%d children after the stop", h.Running())
			}
			if ps := withMarker(t, marker); len(ps) != 0 {
				t.Fatalf("the stop returned while the child still runs: %q", ps)
			}
			// The next turn starts a new child (the session lives on when
			// only a stop, not a delete, ran).
			if _, err := h.Execute(ctx, f.turn(&emitted{}, "two")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A child is not started for a registration whose program's directory
// overlaps DESK_HOME (registered before the check existed, or DESK_HOME
// moved since): the turn fails naming the overlap, and nothing ran.
func TestStartRefusesAnInstallOverlappingHome(t *testing.T) {
	t.Parallel()
	f := setup(t, "/bin/cat")
	ctx := context.Background()
	bin := filepath.Join(f.home.Root, "bin", "agent")
	must(t, os.MkdirAll(filepath.Dir(bin), 0o755))
	ran := filepath.Join(f.home.Root, "ran")
	must(t, os.WriteFile(bin, []byte("#!/bin/sh\ntouch "+ran+"\nexec cat\n"), 0o755))
	must(t, f.store.DeleteRuntime(ctx, "dbl"))
	must(t, f.store.CreateRuntime(ctx, &desk.Runtime{Name: "dbl", Protocol: desk.RuntimeACP, Argv: []string{bin}, CreatedAt: desk.Now()}))
	h := f.host()
	defer h.Close(ctx)
	_, err := h.Execute(ctx, f.turn(&emitted{}, "hi"))
	if err == nil || !strings.Contains(err.Error(), "runtime dbl is not started") || !strings.Contains(err.Error(), "lies inside DESK_HOME "+f.home.Root) {
		t.Fatalf("err %v, want the overlap named", err)
	}
	if _, err := os.Stat(ran); !os.IsNotExist(err) || h.Running() != 0 {
		t.Fatalf("the program ran (%v) or a child runs (%d)", err, h.Running())
	}
}

// A child that was starting while its session's stop ran (the stop could
// not see it yet) is not kept once its session is being deleted: the
// turn fails and the process is gone.
func TestStopDuringStartKeepsNoChild(t *testing.T) {
	t.Parallel()
	marker := "desk-stop-test-" + desk.NewID("m")
	f := setup(t, "/bin/sh", "-c", "cat; :", marker)
	f.d.opening, f.d.hold = make(chan struct{}), make(chan struct{})
	h := f.host()
	ctx := context.Background()
	defer h.Close(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := h.Execute(ctx, f.turn(&emitted{}, "one"))
		errc <- err
	}()
	<-f.d.opening
	must(t, f.store.MarkSessionDeleting(ctx, f.sess.ID))
	must(t, h.StopSession(ctx, f.sess))
	close(f.d.hold)
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Fatalf("the turn of a session being deleted: %v", err)
	}
	if h.Running() != 0 || len(withMarker(t, marker)) != 0 {
		t.Fatalf("a child is kept for a session being deleted (%d, %q)", h.Running(), withMarker(t, marker))
	}
}

// Close honours its context: when a child's protocol close outlasts the
// deadline, Close returns the context's error instead of waiting, and
// stays idempotent: a second Close with a deadline gives up the same way
// while the protocol close still hangs, and one after it ends returns nil
// with the child's process gone.
func TestCloseHonoursItsContext(t *testing.T) {
	t.Parallel()
	marker := "desk-close-test-" + desk.NewID("m")
	f := setup(t, "/bin/sh", "-c", "cat; :", marker)
	f.d.closeHold = make(chan struct{})
	h := f.host()
	ctx := context.Background()
	if _, err := h.Execute(ctx, f.turn(&emitted{}, "one")); err != nil {
		t.Fatal(err)
	}
	if h.Running() != 1 {
		t.Fatalf("%d children after the turn, want 1", h.Running())
	}
	for range 2 {
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := h.Close(short)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close past its deadline returned %v, want %v", err, context.DeadlineExceeded)
		}
	}
	close(f.d.closeHold)
	must(t, h.Close(ctx))
	if h.Running() != 0 {
		t.Fatalf("%d children after Close", h.Running())
	}
	if ps := withMarker(t, marker); len(ps) != 0 {
		t.Fatalf("Close returned while the child still runs: %q", ps)
	}
}
