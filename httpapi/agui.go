package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/httpapi/agui"
	"github.com/desk-runtime/desk/internal/sse"
)

func aguiRoutes() []route {
	const doc = " The body is AG-UI 1.0's RunAgentInput: threadId is the desk session, runId names the run (a repeated runId re-subscribes to the same run and submits nothing), and the newest user message is the turn's prompt; resume entries answer the interrupts an earlier run ended with (approvals, blocking questions). The answer is AG-UI's event stream: RUN_STARTED and a STATE_SNAPSHOT open every connection, then the execution's text and tool calls, ending with RUN_FINISHED (success, cancelled, or interrupt) or RUN_ERROR. Every event after the framing has an SSE id; Last-Event-ID continues after it. See docs/agui.md."
	return []route{
		{Method: "POST", Path: "/v1/agui", Tag: "agui", Summary: "Run an agent turn over AG-UI." + doc,
			Body: "AGUIRunInput", Resp: "AGUIEventStream", Status: 200, handle: (*Server).runAGUI},
		{Method: "POST", Path: "/v1/sessions/{ses}/agui", Tag: "agui", Summary: "Run an agent turn of this session over AG-UI; threadId must be the session." + doc,
			Body: "AGUIRunInput", Resp: "AGUIEventStream", Status: 200, handle: (*Server).runSessionAGUI},
	}
}

func (s *Server) runAGUI(w http.ResponseWriter, r *http.Request) error {
	return s.serveAGUI(w, r, "")
}

func (s *Server) runSessionAGUI(w http.ResponseWriter, r *http.Request) error {
	return s.serveAGUI(w, r, r.PathValue("ses"))
}

// serveAGUI answers one AG-UI run. Its input is read leniently (AG-UI's
// objects are open: fields a newer client adds are ignored); everything
// desk acts on is checked by agui.Start before the stream opens, so a bad
// request is an ordinary JSON error and changes nothing.
func (s *Server) serveAGUI(w http.ResponseWriter, r *http.Request, ses string) error {
	b, err := readJSONBody(w, r)
	if err != nil {
		return err
	}
	var in agui.RunAgentInput
	if err := json.Unmarshal(b, &in); err != nil {
		return desk.Errorf(desk.EINVALID, "the body is not an AG-UI RunAgentInput: %v", err)
	}
	after, err := sse.LastEventID(r)
	if err != nil {
		return err
	}
	svc := agui.Services{Exec: s.Exec, Conversation: s.Conversation, Sessions: s.Sessions, Artifacts: s.Artifacts}
	run, err := agui.Start(r.Context(), svc, ses, &in, after)
	if err != nil {
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
	err = run.Stream(ctx, func(id int64, ev agui.Event) error {
		typ, _ := ev["type"].(string)
		return out.JSON(id, typ, ev)
	})
	if err != nil && ctx.Err() == nil {
		_ = out.JSON(0, "RUN_ERROR", agui.Event{"type": "RUN_ERROR", "message": desk.ErrorMessage(err), "code": desk.ErrorCode(err)})
	}
	return nil
}
