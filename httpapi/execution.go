package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/sse"
)

func executionRoutes() []route {
	return []route{
		{Method: "POST", Path: "/v1/sessions/{ses}/messages", Tag: "execution", Summary: "Send a message: the queue row is committed before anything runs; a repeated idempotency key returns the first row.",
			Body: "MessageSubmit", Resp: "SubmitResult", Status: 202, handle: (*Server).submit},
		{Method: "GET", Path: "/v1/sessions/{ses}/queue", Tag: "execution", Summary: "The session's queue in dispatch order (queued and dispatching rows; all=true adds finished ones).",
			Query: []param{{Name: "all", Type: "boolean", Doc: "include delivered, failed and cancelled rows"}},
			Resp:  "QueueList", Status: 200, handle: (*Server).queue},
		{Method: "POST", Path: "/v1/sessions/{ses}/queue/{q}/steer", Tag: "execution", Summary: "Deliver this queued row next (409 once claimed).",
			Resp: "QueueItem", Status: 200, handle: (*Server).queueSteer},
		{Method: "POST", Path: "/v1/sessions/{ses}/queue/{q}/cancel", Tag: "execution", Summary: "Cancel a row before it is claimed (409 after).",
			Resp: "QueueItem", Status: 200, handle: (*Server).queueCancel},
		{Method: "POST", Path: "/v1/sessions/{ses}/queue/{q}/move", Tag: "execution", Summary: "Move a queued row to the front or back of its priority class.",
			Body: "QueueMove", Resp: "QueueItem", Status: 200, handle: (*Server).queueMove},
		{Method: "POST", Path: "/v1/sessions/{ses}/queue/{q}/approve", Tag: "execution", Summary: "Let a row from another origin run on an attached surface (takeover); never overrides a block.",
			Resp: "QueueItem", Status: 200, handle: (*Server).queueApprove},
		{Method: "POST", Path: "/v1/sessions/{ses}/queue/resume", Tag: "execution", Summary: "Resume a surface held after a block release and dispatch its queue.",
			Body: "QueueResume", Resp: "Surface", Status: 200, handle: (*Server).queueResume},
		{Method: "GET", Path: "/v1/sessions/{ses}/surfaces", Tag: "execution", Summary: "The session's surfaces (the orchestrator and handler threads).",
			Resp: "SurfaceList", Status: 200, handle: (*Server).surfaces},
		{Method: "POST", Path: "/v1/sessions/{ses}/surfaces/{srf}/attach", Tag: "execution", Summary: "Composer heartbeat: while attached, work from other origins waits until the surface is idle or approved.",
			Resp: "Surface", Status: 200, handle: (*Server).attach},
		{Method: "GET", Path: "/v1/sessions/{ses}/executions", Tag: "execution", Summary: "The session's executions, newest first.",
			Resp: "ExecutionList", Status: 200, handle: (*Server).executions},
		{Method: "GET", Path: "/v1/executions/{exe}", Tag: "execution", Summary: "One execution with its events.",
			Resp: "Execution", Status: 200, handle: (*Server).execution},
		{Method: "POST", Path: "/v1/sessions/{ses}/executions/{exe}/interrupt", Tag: "execution", Summary: "Interrupt the exact execution (404 unknown, 409 not current, stopped:false when already over). The actor is the token's.",
			Body: "Interrupt", Resp: "InterruptResult", Status: 200, handle: (*Server).interrupt},
		{Method: "GET", Path: "/v1/sessions/{ses}/blocks", Tag: "execution", Summary: "Admission blocks (user-cooldown, execution-fault, budget), newest first.",
			Resp: "BlockList", Status: 200, handle: (*Server).blocks},
		{Method: "POST", Path: "/v1/sessions/{ses}/blocks/{blk}/release", Tag: "execution", Summary: "Clear a block; starts nothing (queued rows resume at the next submit or queue/resume). A budget block is refused (409): change the token budget.",
			Body: "Interrupt", Resp: "Block", Status: 200, handle: (*Server).releaseBlock},
		{Method: "POST", Path: "/v1/sessions/{ses}/retire", Tag: "sessions", Summary: "Retire a session: its identity and history stay, new work is refused.",
			Resp: "Session", Status: 200, handle: (*Server).retire},
		{Method: "POST", Path: "/v1/sessions/{ses}/recall", Tag: "sessions", Summary: "Recall a retired session.",
			Resp: "Session", Status: 200, handle: (*Server).recall},
		{Method: "POST", Path: "/v1/resolve", Tag: "sessions", Summary: "Follow-up resolution: exact, unavailable (with the reason and the preserved origin), or reconstructed.",
			Body: "ResolveRequest", Resp: "Resolution", Status: 200, handle: (*Server).resolve},
		{Method: "GET", Path: "/v1/events", Tag: "execution", Summary: "Live events (queue, execution, artifact, block, session, thread and episode) as server-sent events; the id only grows and Last-Event-ID resumes without gaps within the retention window.",
			Query: []param{{Name: "workspace", Type: "string", Doc: "only this workspace"}, {Name: "session", Type: "string", Doc: "only this session"},
				{Name: "execution", Type: "string", Doc: "only this execution"}, {Name: "last_event_id", Type: "integer", Doc: "resume after this id (as the Last-Event-ID header)"}},
			Resp: "EventStream", Status: 200, handle: (*Server).events},
	}
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	var in struct {
		desk.MessageSubmit
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if k := r.Header.Get("Idempotency-Key"); k != "" && in.IdempotencyKey == "" {
		in.IdempotencyKey = k
	}
	res, err := s.Exec.Submit(r.Context(), ses, desk.SubmitInput{Text: in.Text, Surface: in.Surface, IdempotencyKey: in.IdempotencyKey,
		Multitask: in.Multitask, Channel: in.Channel, ConversationID: in.ConversationID})
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if !res.Created {
		status = http.StatusOK // the first submit with this key already did the work
	}
	writeJSON(w, status, res)
	return nil
}

func (s *Server) queue(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	all, err := boolParam(r, "all")
	if err != nil {
		return err
	}
	items, err := s.Exec.Queue(r.Context(), ses, all != nil && *all)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.QueueList{Items: nonNil(items)})
	return nil
}

func (s *Server) queueOp(w http.ResponseWriter, r *http.Request, op desk.QueueOp) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	q, err := pathID(r, "q", desk.PrefixQueue)
	if err != nil {
		return err
	}
	it, err := s.Exec.QueueOp(r.Context(), ses, q, op)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, it)
	return nil
}

func (s *Server) queueSteer(w http.ResponseWriter, r *http.Request) error {
	return s.queueOp(w, r, desk.QueueSteer)
}

func (s *Server) queueCancel(w http.ResponseWriter, r *http.Request) error {
	return s.queueOp(w, r, desk.QueueCancel)
}

func (s *Server) queueApprove(w http.ResponseWriter, r *http.Request) error {
	return s.queueOp(w, r, desk.QueueApprove)
}

func (s *Server) queueMove(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		desk.QueueMove
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	switch in.To {
	case "front":
		return s.queueOp(w, r, desk.QueueFront)
	case "back":
		return s.queueOp(w, r, desk.QueueBack)
	}
	return desk.Errorf(desk.EINVALID, "to %q must be front or back", in.To)
}

func (s *Server) queueResume(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	var in struct {
		desk.QueueResume
		ignoredOrigin
	}
	if err := decodeOptional(w, r, &in); err != nil {
		return err
	}
	srf, err := s.Exec.Resume(r.Context(), ses, in.Surface)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, srf)
	return nil
}

func (s *Server) surfaces(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	srfs, err := s.Exec.Surfaces(r.Context(), ses)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.SurfaceList{Surfaces: nonNil(srfs)})
	return nil
}

func (s *Server) attach(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	srf, err := pathID(r, "srf", desk.PrefixSurface)
	if err != nil {
		return err
	}
	out, err := s.Exec.Attach(r.Context(), ses, srf)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) executions(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	xs, err := s.Exec.Executions(r.Context(), ses)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.ExecutionList{Executions: nonNil(xs)})
	return nil
}

func (s *Server) execution(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "exe", desk.PrefixExecution)
	if err != nil {
		return err
	}
	x, err := s.Exec.Execution(r.Context(), id)
	if err != nil {
		return err
	}
	if x.Events == nil {
		x.Events = []desk.ExecutionEvent{}
	}
	writeJSON(w, http.StatusOK, x)
	return nil
}

// userAttributed reads the optional body of interrupt and release: the
// actor is always the token's, so a body that names one is refused rather
// than silently ignored.
func userAttributed(w http.ResponseWriter, r *http.Request) error {
	b, err := readJSONBody(w, r)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(b)) == "" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := decodeJSON(b, &m); err != nil {
		return err
	}
	for k := range m {
		if k == "origin" {
			continue // accepted and ignored, as in every body (ignoredOrigin)
		}
		if k == "actor" || k == "actor_id" || k == "by" {
			return desk.Errorf(desk.EINVALID, "the actor is taken from the token; a body may not name one (%q)", k)
		}
		return desk.Errorf(desk.EINVALID, "unknown field %q; this request takes no body", k)
	}
	return nil
}

func (s *Server) interrupt(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	exe, err := pathID(r, "exe", desk.PrefixExecution)
	if err != nil {
		return err
	}
	if err := userAttributed(w, r); err != nil {
		return err
	}
	res, err := s.Exec.Interrupt(r.Context(), ses, exe)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) blocks(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	bs, err := s.Exec.Blocks(r.Context(), ses)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.BlockList{Blocks: nonNil(bs)})
	return nil
}

func (s *Server) releaseBlock(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	blk, err := pathID(r, "blk", "blk")
	if err != nil {
		return err
	}
	if err := userAttributed(w, r); err != nil {
		return err
	}
	b, err := s.Exec.ReleaseBlock(r.Context(), ses, blk)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

func (s *Server) lifecycle(w http.ResponseWriter, r *http.Request, to string) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	x, err := s.Exec.SetLifecycle(r.Context(), ses, to)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, x)
	return nil
}

func (s *Server) retire(w http.ResponseWriter, r *http.Request) error {
	return s.lifecycle(w, r, desk.SessionRetired)
}

func (s *Server) recall(w http.ResponseWriter, r *http.Request) error {
	return s.lifecycle(w, r, desk.SessionActive)
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		desk.ResolveRequest
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	res, err := s.Sessions.Resolve(r.Context(), in.Target)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// events streams the event log. Each event's SSE id is its seq; a client
// that reconnects with Last-Event-ID gets every later event once. When the
// id is older than the retention window, a "gap" event says what was lost.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := desk.EventFilter{WorkspaceID: q.Get("workspace"), SessionID: q.Get("session"), ExecutionID: q.Get("execution"), AfterSeq: -1}
	after, err := sse.LastEventID(r)
	if err != nil {
		return err
	}
	if r.Header.Get("Last-Event-ID") != "" || q.Get("last_event_id") != "" {
		f.AfterSeq = after
	}
	// A bad filter is an ordinary error answer, before the stream starts.
	if err := s.Exec.ScopeEvents(r.Context(), &f); err != nil {
		return err
	}
	ctx, end, err := s.Streams.Begin(r)
	if err != nil {
		return err
	}
	defer end()
	out := sse.New(w)
	ctx, cancel := context.WithCancel(ctx)
	defer s.Streams.Go(func() { out.KeepAlive(ctx, cancel) })()
	defer cancel()
	err = s.Exec.Tail(ctx, f, func(g desk.EventGap) error {
		return out.JSON(0, "gap", g)
	}, func(e *desk.Event) error {
		return out.JSON(e.Seq, e.Type, e)
	})
	if err != nil && ctx.Err() == nil {
		_ = out.JSON(0, "error", map[string]any{"code": desk.ErrorCode(err), "message": desk.ErrorMessage(err)})
	}
	return nil
}

// decodeOptional decodes a JSON body when there is one.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	err := decode(w, r, v)
	if err != nil && strings.Contains(desk.ErrorMessage(err), "body is empty") {
		return nil
	}
	return err
}
