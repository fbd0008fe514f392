package web

import (
	"context"
	"net/http"
	"regexp"
	"time"

	"github.com/desk-runtime/desk"
)

// Handler threads in the UI (svvy): nested rows under their session in the
// sidebar, a page per thread with its own transcript and composer (its
// messages go to the thread's surface), and in the orchestrator's
// transcript a thread card per thread_start and an episode card per
// report notification, each linking to the thread. A thread's turns never
// colour its session's row: they have dots of their own.

// threadRow is one nested row of the sidebar.
type threadRow struct {
	T       *desk.Thread
	WS      string
	Tone    string
	Current bool
}

// ToneLabel is the words of the thread's dot.
func (r threadRow) ToneLabel() string { return toneLabel(r.Tone) }

// threadRows lists a session's threads with their own status.
func (s *Server) threadRows(ctx context.Context, x *desk.Session, current string) []threadRow {
	ths, err := s.d.Conversation.Threads(ctx, x.ID, "")
	if err != nil || len(ths) == 0 {
		return nil
	}
	exes, err := s.d.Store.ListExecutions(ctx, x.ID, 50)
	if err != nil {
		exes = nil
	}
	aps, _ := s.d.Conversation.Approvals(ctx, x.ID, true)
	ins, _ := s.d.Conversation.InputRequests(ctx, x.ID)
	out := make([]threadRow, 0, len(ths))
	for _, th := range ths {
		r := threadRow{T: th, WS: x.WorkspaceID, Current: th.ID == current}
		for _, e := range exes {
			if e.SurfaceID != th.SurfaceID {
				continue
			}
			switch {
			case desk.PhaseActive(e.Phase):
				r.Tone = "running"
				if waitsOn(e.ID, aps, ins) {
					r.Tone = "waiting"
				}
			case e.Phase == desk.PhaseFailed:
				r.Tone = "error"
			}
			break // the newest execution of the thread's surface decides
		}
		out = append(out, r)
	}
	return out
}

// waitsOn reports whether an execution waits on a pending approval or
// question.
func waitsOn(exe string, aps []*desk.Approval, ins []*desk.InputRequest) bool {
	for _, a := range aps {
		if a.ExecutionID == exe {
			return true
		}
	}
	for _, q := range ins {
		if q.ExecutionID == exe && q.Status == desk.InputPending {
			return true
		}
	}
	return false
}

// threadView is a thread's page.
type threadView struct {
	*sessionView
	T *desk.Thread
}

func (s *Server) threadPage(w http.ResponseWriter, r *request) error {
	ws, err := s.workspaceOf(r)
	if err != nil {
		return err
	}
	x, err := s.session(r)
	if err != nil {
		return err
	}
	th, err := s.d.Conversation.Thread(r.Context(), r.PathValue("thr"))
	if err != nil {
		return err
	}
	if x.WorkspaceID != ws.ID || th.SessionID != x.ID {
		return desk.Errorf(desk.ENOTFOUND, "thread %s not found in session %s", r.PathValue("thr"), x.ID)
	}
	th.Git = x.Git // a handler thread runs in its session's /workspace
	_, after, err := s.d.Store.EventBounds(r.Context())
	if err != nil {
		return err
	}
	// The session as the thread's surface shows it: its transcript, run
	// bar, queue and cards are the thread's. Transcript seqs count per
	// surface, so the stream resumes after the thread's own last message.
	v, err := s.sessionView(r.Context(), onSurface(x, th.SurfaceID))
	if err != nil {
		return err
	}
	d, err := s.d.UI.Draft(r.Context(), x.ID, th.SurfaceID)
	if err != nil {
		return err
	}
	v.Draft = d.Text
	stamp([]part{{data: v.Run}, {data: v.Queue}, {data: v.Cards}, {data: v.Budget}}, after)
	v.WS, v.After, v.Admin = ws.ID, after, r.p.Admin
	l, err := s.page(r, ws, "sessions", th.Title, "thread-main", &threadView{sessionView: v, T: th})
	if err != nil {
		return err
	}
	if l.Side != nil {
		l.Side.Thread = th.ID
		markThread(l.Side, th.ID)
	}
	return s.render(w, "layout", l)
}

func markThread(sb *sidebar, id string) {
	for _, rows := range [][]row{sb.Pinned, sb.Recent, sb.Archived} {
		for i := range rows {
			for j := range rows[i].Threads {
				rows[i].Threads[j].Current = rows[i].Threads[j].T.ID == id
			}
		}
	}
}

// threadCard is what the orchestrator's transcript shows of one thread a
// thread_start opened, or an episode a notification carried.
type threadCard struct {
	WS, Ses string
	T       *desk.Thread
	E       *desk.Episode
	At      time.Time
}

var episodeAttr = regexp.MustCompile(`^<thread_report [^>]*episode="(epi_[A-Za-z0-9]+)"`)

// threadCards fills the orchestrator transcript's cards: the threads each
// thread_start span opened, and the episode each notification message
// carries.
func (s *Server) threadCards(ctx context.Context, x *desk.Session, ts []*turnView) {
	ths, err := s.d.Conversation.Threads(ctx, x.ID, "")
	if err != nil || len(ths) == 0 {
		return
	}
	byCmd := map[string][]*desk.Thread{}
	byID := map[string]*desk.Thread{}
	for _, th := range ths {
		byCmd[th.CommandID] = append(byCmd[th.CommandID], th)
		byID[th.ID] = th
	}
	for _, tv := range ts {
		if tv.User != nil {
			if m := episodeAttr.FindStringSubmatch(tv.User.M.Text); m != nil {
				if e, err := s.d.Conversation.Episode(ctx, m[1]); err == nil && byID[e.ThreadID] != nil {
					tv.User.Episode = &threadCard{WS: x.WorkspaceID, Ses: x.ID, T: byID[e.ThreadID], E: e}
				}
			}
			continue
		}
		for _, st := range tv.Steps {
			for _, sp := range st.Spans {
				if sp.Cmd == nil {
					continue
				}
				for _, th := range byCmd[sp.Cmd.ID] {
					sp.Threads = append(sp.Threads, &threadCard{WS: x.WorkspaceID, Ses: x.ID, T: th})
				}
			}
		}
	}
}

// onSurface is x as one of its surfaces shows it: the regions of a page
// (run bar, queue, cards) read the surface the page shows, so a thread's
// page shows the thread's turn and the orchestrator's page only its own.
func onSurface(x *desk.Session, surface string) *desk.Session {
	if surface == "" || surface == x.SurfaceID {
		return x
	}
	c := *x
	c.SurfaceID = surface
	return &c
}

// exeSurface finds the surface an execution ran on ("" when unknown).
func (s *Server) exeSurface(ctx context.Context, id string) string {
	e, err := s.d.Exec.Execution(ctx, id)
	if err != nil {
		return ""
	}
	return e.SurfaceID
}
