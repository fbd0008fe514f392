package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

// errWatchDone ends following once the watched execution settled.
var errWatchDone = errors.New("the watched turn settled")

// watchCmd follows a turn live, wherever it was started (the web UI, a
// routine, MCP, another terminal): the reply as it streams, each tool call
// as one line, what the turn waits on and how to answer, the outcome.
func watchCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "watch SES|EXE",
		Short: "Follow a turn live: its reply, each tool call as one line, what it waits on, how it ended",
		Long: `Follow a turn live, wherever it was started. With an execution id, the whole
turn from its start (what already happened first) until it settles; the exit
status then says how it ended: 0 ended, 8 failed, 9 interrupted. With a session
id, the session's running turn from its start and every turn after it, until
Ctrl-C.

On a terminal the running tool call's line updates in place (its command or
file, how long it has run, its newest output line); otherwise each line is
written once, when it is settled. --json writes the events as NDJSON instead.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			tty := false
			if f, ok := w.(*os.File); ok && !g.json {
				tty = term.IsTerminal(int(f.Fd()))
			}
			// Ctrl-C ends a watch cleanly (the turn goes on).
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			return watch(ctx, c, a[0], w, tty, g.json)
		},
	}
}

// watch follows id (an execution or a session) to w.
func watch(ctx context.Context, c *client.Client, id string, w io.Writer, tty, asJSON bool) error {
	var mu sync.Mutex // the ticker and the event stream draw on w
	t := newTrace(w, tty)
	f := client.EventFilter{}
	after := int64(-1)
	exe := ""
	switch {
	case strings.HasPrefix(id, "exe_"):
		x, err := c.Execution(ctx, id)
		if err != nil {
			return err
		}
		exe, f.Execution = x.ID, x.ID
		if x.Terminal() {
			// Nothing more will come: its recorded events are the trace.
			for i := range x.Events {
				e := eventOf(x, &x.Events[i])
				if asJSON {
					writeJSONLine(w, e)
				} else {
					t.event(e)
				}
			}
			if !asJSON && t.final == nil {
				t.outcome(x)
			}
			return turnExit(x)
		}
		after = 0 // the whole turn, from its first event
	case strings.HasPrefix(id, "ses_"):
		f.Session = id
		// The running turn from its start, so a watch begun mid-turn
		// shows what already happened.
		xs, err := c.Executions(ctx, id)
		if err != nil {
			return err
		}
		for _, x := range xs {
			if desk.PhaseActive(x.Phase) {
				full, err := c.Execution(ctx, x.ID)
				if err == nil && len(full.Events) > 0 && (after < 0 || full.Events[0].Seq-1 < after) {
					after = full.Events[0].Seq - 1
				}
			}
		}
	default:
		return usagef("desk watch takes a session id (ses_…) or an execution id (exe_…), not %q", id)
	}
	if tty && !asJSON {
		// The running call's duration moves while nothing arrives.
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-tick.C:
					mu.Lock()
					t.tick()
					mu.Unlock()
				case <-done:
					return
				}
			}
		}()
	}
	err := c.Events(ctx, f, after, func(e *desk.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if asJSON {
			writeJSONLine(w, e)
			if exe != "" && e.ExecutionID == exe && strings.HasPrefix(e.Type, "execution.") {
				var x desk.Execution
				if json.Unmarshal(e.Data, &x) == nil && x.Terminal() {
					t.final = &x
					return errWatchDone
				}
			}
			return nil
		}
		if e.Type == "gap" && exe != "" {
			// Events were dropped: the turn may have settled unseen.
			if x, err := c.Execution(ctx, exe); err == nil && x.Terminal() {
				t.outcome(x)
				return errWatchDone
			}
			return nil
		}
		if t.event(e) && exe != "" && t.final != nil && t.final.ID == exe {
			return errWatchDone
		}
		return nil
	})
	if errors.Is(err, errWatchDone) {
		return turnExit(t.final)
	}
	if ctx.Err() != nil {
		mu.Lock()
		t.clearLive()
		if !t.col0 {
			fmt.Fprintln(w)
		}
		mu.Unlock()
		if exe == "" {
			return nil // Ctrl-C ends watching a session
		}
	}
	return err
}

// eventOf is an execution's recorded event as the stream carries it.
func eventOf(x *desk.Execution, e *desk.ExecutionEvent) *desk.Event {
	return &desk.Event{Seq: e.Seq, At: e.At, Type: e.Type, SessionID: x.SessionID, SurfaceID: x.SurfaceID, ExecutionID: x.ID, Data: e.Data}
}

func writeJSONLine(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "%s\n", b)
}

// turnExit is the exit status of a settled turn, as desk send gives it.
func turnExit(x *desk.Execution) error {
	if x == nil {
		return nil
	}
	switch x.Phase {
	case desk.PhaseFailed:
		return &codedError{exitTurnFailed, fmt.Sprintf("the turn %s failed: %s", x.ID, orDash(x.Reason))}
	case desk.PhaseInterrupted:
		return &codedError{exitInterrupted, fmt.Sprintf("the turn %s was interrupted: %s", x.ID, orDash(x.Reason))}
	}
	return nil
}
