package httpapi

import (
	"net/http"

	"github.com/desk-runtime/desk"
)

func routineRoutes() []route {
	return []route{
		{Method: "POST", Path: "/v1/workspaces/{ws}/routines", Tag: "routines", Summary: "Create a routine: a prompt submitted on a schedule (cron with a time zone, or @every) to a session or to a new session per run.",
			Body: "RoutineCreate", Resp: "Routine", Status: 201, handle: (*Server).createRoutine},
		{Method: "GET", Path: "/v1/workspaces/{ws}/routines", Tag: "routines", Summary: "List the workspace's routines the caller may see (the admin all, an actor its own).",
			Resp: "RoutineList", Status: 200, handle: (*Server).listRoutines},
		{Method: "GET", Path: "/v1/workspaces/{ws}/routines/{rtn}", Tag: "routines", Summary: "Get a routine with its next run time.",
			Resp: "Routine", Status: 200, handle: (*Server).getRoutine},
		{Method: "PATCH", Path: "/v1/workspaces/{ws}/routines/{rtn}", Tag: "routines", Summary: "Change a routine: name, schedule, zone, prompt, overlap, pause (enabled false) or resume.",
			Body: "RoutineUpdate", Resp: "Routine", Status: 200, handle: (*Server).updateRoutine},
		{Method: "DELETE", Path: "/v1/workspaces/{ws}/routines/{rtn}", Tag: "routines", Summary: "Delete a routine and its run history; runs already submitted go on.",
			Status: 204, handle: (*Server).deleteRoutine},
		{Method: "POST", Path: "/v1/workspaces/{ws}/routines/{rtn}/run", Tag: "routines", Summary: "Run a routine now, by hand; the overlap policy holds (skip while a run is going).",
			Resp: "RoutineRun", Status: 201, handle: (*Server).runRoutine},
		{Method: "GET", Path: "/v1/workspaces/{ws}/routines/{rtn}/runs", Tag: "routines", Summary: "A routine's runs, newest first, with their outcome.",
			Query: []param{{Name: "limit", Type: "integer", Doc: "page size (default 100, at most 500)"}},
			Resp:  "RoutineRunList", Status: 200, handle: (*Server).listRoutineRuns},
	}
}

func (s *Server) routines() (desk.RoutineService, error) {
	if s.Routines == nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "routines are not available on this desk")
	}
	return s.Routines, nil
}

func routinePath(r *http.Request) (ws, id string, err error) {
	if ws, err = pathID(r, "ws", desk.PrefixWorkspace); err != nil {
		return "", "", err
	}
	id, err = pathID(r, "rtn", desk.PrefixRoutine)
	return ws, id, err
}

func (s *Server) createRoutine(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.routines()
	if err != nil {
		return err
	}
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	var in struct {
		desk.RoutineCreate
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	rt, err := svc.Create(r.Context(), ws, in.RoutineCreate)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, rt)
	return nil
}

func (s *Server) listRoutines(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.routines()
	if err != nil {
		return err
	}
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	rs, err := svc.List(r.Context(), ws)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.RoutineList{Routines: nonNil(rs)})
	return nil
}

func (s *Server) getRoutine(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.routines()
	if err != nil {
		return err
	}
	ws, id, err := routinePath(r)
	if err != nil {
		return err
	}
	rt, err := svc.Get(r.Context(), ws, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rt)
	return nil
}

func (s *Server) updateRoutine(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.routines()
	if err != nil {
		return err
	}
	ws, id, err := routinePath(r)
	if err != nil {
		return err
	}
	var in struct {
		desk.RoutineUpdate
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	rt, err := svc.Update(r.Context(), ws, id, in.RoutineUpdate)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rt)
	return nil
}

func (s *Server) deleteRoutine(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.routines()
	if err != nil {
		return err
	}
	ws, id, err := routinePath(r)
	if err != nil {
		return err
	}
	if err := svc.Delete(r.Context(), ws, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) runRoutine(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.routines()
	if err != nil {
		return err
	}
	ws, id, err := routinePath(r)
	if err != nil {
		return err
	}
	run, err := svc.RunNow(r.Context(), ws, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, run)
	return nil
}

func (s *Server) listRoutineRuns(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.routines()
	if err != nil {
		return err
	}
	ws, id, err := routinePath(r)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit")
	if err != nil {
		return err
	}
	runs, err := svc.Runs(r.Context(), ws, id, int(limit))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.RoutineRunList{Runs: nonNil(runs)})
	return nil
}
