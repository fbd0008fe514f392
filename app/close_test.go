package app_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent"
	"github.com/desk-runtime/desk/agent/provider"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/store/sqlite"
)

// The lifecycle contract of the App as a whole: Close is idempotent,
// honours its deadline and leaves nothing running; a failed Open closes
// what it opened.

// TestAppCloseTwice: a second App.Close is harmless (it used to panic in
// the store with "close of closed channel").
func TestAppCloseTwice(t *testing.T) {
	apptest.Parallel(t)
	e := apptest.Start(t, app.Config{})
	e.Server.Close()
	for i := range 2 {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Close #%d panicked: %v", i+1, r)
				}
			}()
			if err := e.App.Close(t.Context()); err != nil {
				t.Fatalf("Close #%d: %v", i+1, err)
			}
		}()
	}
}

// titleBlocker is a model whose turns answer at once and whose title calls
// hang until their context ends.
type titleBlocker struct{ titling chan struct{} }

func (p *titleBlocker) Stream(ctx context.Context, req provider.Request, fn func(provider.Event)) (*provider.Response, error) {
	if strings.HasPrefix(req.System, "Write a title") {
		select {
		case p.titling <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &provider.Response{Text: "done", StopReason: "end"}, nil
}

func (p *titleBlocker) ContextWindow(string) int { return 100000 }

// TestCloseCancelsTitleCall: App.Close does not wait out a session title's
// model call (it used to, for up to 30 s, with no way to cut it short):
// the call is cancelled, Close returns well within its deadline, and the
// session keeps the first words of its message as its title.
func TestCloseCancelsTitleCall(t *testing.T) {
	apptest.Parallel(t)
	p := &titleBlocker{titling: make(chan struct{}, 1)}
	w := newWorldOn(t, app.Config{Models: []string{"openai:fake"}, Agent: agent.Options{
		Providers: func(provider.Spec) (provider.Provider, error) { return p, nil }}})
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": "openai:fake"}, &x)
	w.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "Plan the spring garden beds"}, nil)
	select {
	case <-p.titling:
	case <-time.After(agentWait):
		t.Fatal("no title call")
	}
	w.Server.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := w.App.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Close took %v with a title call open", d)
	}
	w.Restart()
	var got desk.Session
	w.Must(200, "GET", "/v1/sessions/"+x.ID, nil, &got)
	if got.Title != "Plan the spring garden beds" {
		t.Fatalf("title after a cancelled title call = %q, want the message's first words", got.Title)
	}
}

// failJournals fails the lifecycle's startup recovery, which runs inside
// the execution service's Open: late in app.Open, with the store, the app
// log, the archive, the agent and the execution owner already open.
type failJournals struct{ desk.Store }

var errJournals = errors.New("journals are unreadable")

func (f failJournals) ListLifecycleJournals(context.Context) ([]*desk.LifecycleJournal, error) {
	return nil, errJournals
}

// TestOpenFailureUnwinds: a step failing midway through Open closes what
// was opened, in reverse: no goroutine is left, the execution owner is
// marked stopped, and the same home opens again at once.
func TestOpenFailureUnwinds(t *testing.T) {
	// Not parallel: goleak here sees the whole process.
	ignore := goleak.IgnoreCurrent()
	home := t.TempDir()
	_, err := app.Open(t.Context(), app.Config{Home: home, WrapStore: func(s desk.Store) desk.Store { return failJournals{s} }})
	if !errors.Is(err, errJournals) {
		t.Fatalf("Open = %v, want the recovery's error", err)
	}
	if err := goleak.Find(ignore); err != nil {
		t.Fatalf("a failed Open left goroutines behind: %v", err)
	}
	st, err := sqlite.Open(t.Context(), home+"/desk.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	owners, err := st.ListOwners(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(owners) != 1 || owners[0].StoppedAt.IsZero() {
		t.Fatalf("owners after a failed Open: %+v, want one, stopped", owners)
	}
	apptest.Start(t, app.Config{Home: home}) // opens, and closes cleanly
}

// TestComponentsCloseIdempotent: every component's Close may be called
// more than once — directly, and again by App.Close — and answers nil.
func TestComponentsCloseIdempotent(t *testing.T) {
	apptest.Parallel(t)
	e := apptest.Start(t, app.Config{})
	e.Server.Close()
	a := e.App
	ctx := t.Context()
	closers := map[string]func(context.Context) error{
		"event streams": a.Streams.Close, "ui state": a.UI.Close, "execution": a.Exec.Close,
		"agent": a.Agent.Close, "archive": a.Archive.Close, "app log": a.Logs.Close,
		"store": func(context.Context) error { return a.Store.Close() },
	}
	for _, name := range []string{"event streams", "ui state", "execution", "agent", "archive", "app log", "store"} {
		for i := range 2 {
			if err := closers[name](ctx); err != nil {
				t.Fatalf("%s: Close #%d: %v", name, i+1, err)
			}
		}
	}
	if err := a.Close(ctx); err != nil {
		t.Fatalf("App.Close after every component closed: %v", err)
	}
}
