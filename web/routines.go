package web

import (
	"net/http"
	"strings"

	"github.com/desk-runtime/desk"
)

// routinesView is a workspace's Routines page: each routine with its
// latest runs, and the form that creates one.
type routinesView struct {
	WS        *desk.Workspace
	Available bool
	Routines  []routineRow
	Sessions  []*desk.Session
}

type routineRow struct {
	*desk.Routine
	Runs []*desk.RoutineRun
}

// routineRunsShown is how many runs the page shows per routine; the API
// and the CLI page through the rest.
const routineRunsShown = 5

func (s *Server) routinesView(r *request) (*routinesView, error) {
	ws, err := s.workspaceOf(r)
	if err != nil {
		return nil, err
	}
	v := &routinesView{WS: ws, Available: s.d.Routines != nil}
	if !v.Available {
		return v, nil
	}
	rs, err := s.d.Routines.List(r.Context(), ws.ID)
	if err != nil {
		return nil, err
	}
	for _, rt := range rs {
		runs, err := s.d.Routines.Runs(r.Context(), ws.ID, rt.ID, routineRunsShown)
		if err != nil {
			return nil, err
		}
		v.Routines = append(v.Routines, routineRow{Routine: rt, Runs: runs})
	}
	if v.Sessions, err = s.d.Sessions.List(r.Context(), desk.SessionFilter{WorkspaceID: ws.ID}); err != nil {
		return nil, err
	}
	return v, nil
}

func (s *Server) routinesPage(w http.ResponseWriter, r *request) error {
	v, err := s.routinesView(r)
	if err != nil {
		return err
	}
	if isHTMX(r.Request) {
		return s.render(w, "routines-main", v)
	}
	l, err := s.page(r, v.WS, "routines", "Routines · "+v.WS.Name, "routines-main", v)
	if err != nil {
		return err
	}
	return s.render(w, "layout", l)
}

func (s *Server) routinesService() (desk.RoutineService, error) {
	if s.d.Routines == nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "routines are not available on this desk")
	}
	return s.d.Routines, nil
}

// createRoutine creates a routine from the page's form and answers the
// refreshed page; bad input is refused by the service, naming the field.
func (s *Server) createRoutine(w http.ResponseWriter, r *request) error {
	svc, err := s.routinesService()
	if err != nil {
		return err
	}
	ws, err := s.workspaceOf(r)
	if err != nil {
		return err
	}
	f := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	in := desk.RoutineCreate{Name: f("name"), Schedule: f("schedule"), TimeZone: f("time_zone"),
		SessionID: f("session_id"), TitleTemplate: f("title_template"), Prompt: r.PostFormValue("prompt"), Overlap: f("overlap")}
	if _, err := svc.Create(r.Context(), ws.ID, in); err != nil {
		return err
	}
	v, err := s.routinesView(r)
	if err != nil {
		return err
	}
	return s.render(w, "routines-main", v)
}

// routineAction runs, pauses, resumes or deletes a routine and answers
// the refreshed page.
func (s *Server) routineAction(w http.ResponseWriter, r *request) error {
	svc, err := s.routinesService()
	if err != nil {
		return err
	}
	ws, err := s.workspaceOf(r)
	if err != nil {
		return err
	}
	id := r.PathValue("rtn")
	if !desk.HasPrefix(id, desk.PrefixRoutine) {
		return desk.Errorf(desk.ENOTFOUND, "routine %q not found", id)
	}
	switch op := r.PathValue("op"); op {
	case "run":
		_, err = svc.RunNow(r.Context(), ws.ID, id)
	case "pause", "resume":
		on := op == "resume"
		_, err = svc.Update(r.Context(), ws.ID, id, desk.RoutineUpdate{Enabled: &on})
	case "delete":
		err = svc.Delete(r.Context(), ws.ID, id)
	default:
		err = desk.Errorf(desk.EINVALID, "routine action %q must be run, pause, resume or delete", op)
	}
	if err != nil {
		return err
	}
	v, err := s.routinesView(r)
	if err != nil {
		return err
	}
	return s.render(w, "routines-main", v)
}
