package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/desk-runtime/desk"
)

// AgentStore is the part of the store the agent routes read and change.
type AgentStore interface {
	GetSessionAgent(ctx context.Context, sessionID string) (*desk.SessionAgent, error)
	SetSessionAgent(ctx context.Context, sessionID string, a *desk.SessionAgent) error
	GetAgentSettings(ctx context.Context, workspaceID string) (*desk.AgentSettings, error)
	SetAgentSettings(ctx context.Context, workspaceID string, s *desk.AgentSettings) error
}

func agentRoutes() []route {
	return []route{
		{Method: "GET", Path: "/v1/sessions/{ses}/messages", Tag: "agent", Summary: "The transcript, tool calls folded into their messages with their command records; the newest page first requested, oldest first within it.",
			Query: []param{{Name: "surface", Type: "string", Doc: "default: the orchestrator surface"},
				{Name: "before", Type: "integer", Doc: "only messages with seq below this (paging back)"},
				{Name: "limit", Type: "integer", Doc: "page size (default 50, at most 500)"},
				{Name: "branches", Type: "boolean", Doc: "every branch of the transcript tree by seq (each message names its parent_id), not only the active one; before and limit do not apply"}},
			Resp: "MessageList", Status: 200, handle: (*Server).messages},
		{Method: "POST", Path: "/v1/sessions/{ses}/messages/{msg}/edit", Tag: "agent", Summary: "Edit and resend a committed user message: the revised text is queued as a new branch from the original's parent on the same surface; the original branch stays as it was.",
			Body: "MessageEdit", Resp: "SubmitResult", Status: 202, handle: (*Server).editMessage},
		{Method: "GET", Path: "/v1/sessions/{ses}/context", Tag: "agent", Summary: "Exactly what the next turn would send: system prompt, world block, tool names, and the context budget.",
			Query: []param{{Name: "surface", Type: "string", Doc: "default: the orchestrator surface"}},
			Resp:  "ContextView", Status: 200, handle: (*Server).contextView},
		{Method: "PUT", Path: "/v1/sessions/{ses}/focus", Tag: "agent", Summary: "Set (or clear with {}) the focused page the world block names.",
			Body: "Focus", Resp: "Focus", Status: 200, handle: (*Server).setFocus},
		{Method: "GET", Path: "/v1/sessions/{ses}/approvals", Tag: "agent", Summary: "Approval requests of gated tool calls.",
			Query: []param{{Name: "pending", Type: "boolean", Doc: "only the ones waiting for a decision"}},
			Resp:  "ApprovalList", Status: 200, handle: (*Server).approvals},
		{Method: "POST", Path: "/v1/approvals/{apr}", Tag: "agent", Summary: "Approve or deny a gated tool call (409 once decided).",
			Body: "ApprovalDecision", Resp: "Approval", Status: 200, handle: (*Server).decideApproval},
		{Method: "GET", Path: "/v1/sessions/{ses}/input-requests", Tag: "agent", Summary: "Questions the agent asked (request_user_input, clarify).",
			Resp: "InputRequestList", Status: 200, handle: (*Server).inputRequests},
		{Method: "POST", Path: "/v1/input-requests/{inp}/answer", Tag: "agent", Summary: "Answer a question; a non-blocking request's answer is queued as a request_user_input_answer row.",
			Body: "InputAnswer", Resp: "InputAnswered", Status: 200, handle: (*Server).answerInput},
		{Method: "POST", Path: "/v1/plans/{pln}/approve", Tag: "agent", Summary: "Approve a plan card: it is pinned to the execution and re-injected before each step.",
			Body: "PlanDecision", Resp: "Plan", Status: 200, handle: (*Server).approvePlan},
		{Method: "POST", Path: "/v1/plans/{pln}/decline", Tag: "agent", Summary: "Decline a plan card: the execution stops.",
			Body: "PlanDecision", Resp: "Plan", Status: 200, handle: (*Server).declinePlan},
		{Method: "POST", Path: "/v1/plans/{pln}/revise", Tag: "agent", Summary: "Ask for changes to a plan card (notes required); the model proposes a new card.",
			Body: "PlanDecision", Resp: "Plan", Status: 200, handle: (*Server).revisePlan},
		{Method: "GET", Path: "/v1/workspaces/{ws}/agent", Tag: "agent", Summary: "The workspace's agent settings: approval mode, network for commands, blocking input, token budget, external instructions.",
			Resp: "AgentSettings", Status: 200, handle: (*Server).agentSettings},
		{Method: "PATCH", Path: "/v1/workspaces/{ws}/agent", Tag: "agent", Summary: "Change the workspace's agent settings (admin).",
			Body: "AgentSettingsPatch", Resp: "AgentSettings", Status: 200, handle: (*Server).patchAgentSettings},
		{Method: "GET", Path: "/v1/models", Tag: "agent", Summary: "The models a session may choose, exactly as the operator declared them: the default (DESK_MODEL) first, the others (DESK_MODELS), then script; any other model is refused with 400.",
			Resp: "ModelList", Status: 200, handle: (*Server).models},
	}
}

func intParam(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, desk.Errorf(desk.EINVALID, "query parameter %s=%q must be a non-negative integer", name, v)
	}
	return n, nil
}

// sessionSurface returns the visible session and the surface a request
// names (default: the orchestrator).
func (s *Server) sessionSurface(r *http.Request) (*desk.Session, string, error) {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return nil, "", err
	}
	x, err := s.Sessions.Get(r.Context(), ses)
	if err != nil {
		return nil, "", err
	}
	srf := r.URL.Query().Get("surface")
	if srf == "" {
		return x, x.SurfaceID, nil
	}
	srfs, err := s.Exec.Surfaces(r.Context(), x.ID)
	if err != nil {
		return nil, "", err
	}
	for _, f := range srfs {
		if f.ID == srf {
			return x, srf, nil
		}
	}
	return nil, "", desk.Errorf(desk.ENOTFOUND, "surface %s not found in session %s", srf, x.ID)
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) error {
	_, srf, err := s.sessionSurface(r)
	if err != nil {
		return err
	}
	before, err := intParam(r, "before")
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit")
	if err != nil {
		return err
	}
	branches, err := boolParam(r, "branches")
	if err != nil {
		return err
	}
	var ms []*desk.Message
	if branches != nil && *branches {
		ms, err = s.Conversation.TranscriptTree(r.Context(), srf)
	} else {
		ms, err = s.Conversation.Transcript(r.Context(), srf, before, int(limit))
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.MessageList{Messages: nonNil(ms)})
	return nil
}

// editMessage queues the revised text of a committed user message.
func (s *Server) editMessage(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	msg, err := pathID(r, "msg", "msg")
	if err != nil {
		return err
	}
	var in struct {
		desk.MessageEdit
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	// Submit checks the message: a committed user message of this session
	// (another actor's session is not found, as everywhere else).
	res, err := s.Exec.Submit(r.Context(), ses, desk.SubmitInput{Text: in.Text, EditOf: msg})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, res)
	return nil
}

func (s *Server) contextView(w http.ResponseWriter, r *http.Request) error {
	x, srf, err := s.sessionSurface(r)
	if err != nil {
		return err
	}
	v, err := s.Agent.Context(r.Context(), x, srf)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) setFocus(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	type focus struct {
		URL   string `json:"url"`
		Title string `json:"title"`
	}
	var body struct {
		focus
		ignoredOrigin
	}
	if err := decode(w, r, &body); err != nil {
		return err
	}
	in := body.focus // what is stored and answered: never the ignored origin
	x, err := s.Sessions.Get(r.Context(), ses)
	if err != nil {
		return err
	}
	sa, err := s.AgentStore.GetSessionAgent(r.Context(), x.ID)
	if err != nil {
		return err
	}
	sa.Focus = nil
	if in.URL != "" {
		sa.Focus, _ = json.Marshal(in)
	} else if in.Title != "" {
		return desk.Errorf(desk.EINVALID, "a focus needs a url")
	}
	if err := s.AgentStore.SetSessionAgent(r.Context(), x.ID, sa); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, in)
	return nil
}

func (s *Server) approvals(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	pending, err := boolParam(r, "pending")
	if err != nil {
		return err
	}
	as, err := s.Conversation.Approvals(r.Context(), ses, pending != nil && *pending)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.ApprovalList{Approvals: nonNil(as)})
	return nil
}

func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "apr", "apr")
	if err != nil {
		return err
	}
	var in struct {
		desk.ApprovalDecision
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	choice, err := in.Choice()
	if err != nil {
		return err
	}
	a, err := s.Conversation.DecideApproval(r.Context(), id, choice, in.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) inputRequests(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	rs, err := s.Conversation.InputRequests(r.Context(), ses)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.InputRequestList{InputRequests: nonNil(rs)})
	return nil
}

func (s *Server) answerInput(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "inp", "inp")
	if err != nil {
		return err
	}
	var in struct {
		desk.InputAnswer
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	req, res, err := s.Conversation.AnswerInput(r.Context(), id, in.Answers)
	if err != nil {
		return err
	}
	out := desk.InputAnswerResult{InputRequest: req}
	if res != nil {
		out.QueuedItem = res.Item
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) decidePlan(w http.ResponseWriter, r *http.Request, decision string) error {
	id, err := pathID(r, "pln", "pln")
	if err != nil {
		return err
	}
	var in struct {
		desk.PlanDecision
		ignoredOrigin
	}
	if err := decodeOptional(w, r, &in); err != nil {
		return err
	}
	p, err := s.Conversation.DecidePlan(r.Context(), id, decision, in.Notes)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) approvePlan(w http.ResponseWriter, r *http.Request) error {
	return s.decidePlan(w, r, "approve")
}
func (s *Server) declinePlan(w http.ResponseWriter, r *http.Request) error {
	return s.decidePlan(w, r, "decline")
}
func (s *Server) revisePlan(w http.ResponseWriter, r *http.Request) error {
	return s.decidePlan(w, r, "revise")
}

func (s *Server) agentSettings(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	if _, err := s.Workspaces.GetWorkspace(r.Context(), ws); err != nil {
		return err
	}
	st, err := s.AgentStore.GetAgentSettings(r.Context(), ws)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) patchAgentSettings(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	if p, _ := desk.PrincipalFrom(r.Context()); !p.Admin {
		return desk.Errorf(desk.EFORBIDDEN, "only the admin token may change a workspace's agent settings")
	}
	var in struct {
		ApprovalMode  *string `json:"approval_mode"`
		Network       *bool   `json:"network"`
		BlockingInput *bool   `json:"blocking_input"`
		// ExternalInstructions turns the checkout's AGENTS.md / CLAUDE.md
		// in the system prompt on or off.
		ExternalInstructions *bool `json:"external_instructions"`
		// GitWritable lets the agent write /workspace's .git/hooks and
		// .git/config (off by default).
		GitWritable *bool `json:"git_writable"`
		// TokenBudget is raw so null (clear) differs from absent.
		TokenBudget json.RawMessage `json:"token_budget"`
		Sandbox     *struct {
			Processes   *int   `json:"processes"`
			MemoryBytes *int64 `json:"memory_bytes"`
			CPUSeconds  *int   `json:"cpu_seconds"`
			TmpBytes    *int64 `json:"tmp_bytes"`
			OutputBytes *int64 `json:"output_bytes"`
		} `json:"sandbox"`
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if _, err := s.Workspaces.GetWorkspace(r.Context(), ws); err != nil {
		return err
	}
	st, err := s.AgentStore.GetAgentSettings(r.Context(), ws)
	if err != nil {
		return err
	}
	if in.ApprovalMode != nil {
		// The one check an import makes too.
		if err := desk.CheckApprovalMode(*in.ApprovalMode); err != nil {
			return err
		}
		st.ApprovalMode = *in.ApprovalMode
	}
	if in.Network != nil {
		st.Network = *in.Network
	}
	if in.BlockingInput != nil {
		st.BlockingInput = *in.BlockingInput
	}
	if in.ExternalInstructions != nil {
		st.ExternalInstructions = *in.ExternalInstructions
	}
	if in.GitWritable != nil {
		st.GitWritable = *in.GitWritable
	}
	budget := st.TokenBudget
	if len(in.TokenBudget) > 0 {
		if budget, err = tokenBudget(in.TokenBudget); err != nil {
			return err
		}
	}
	changed := budget != st.TokenBudget
	st.TokenBudget = budget
	if l := in.Sandbox; l != nil {
		// An absent field keeps its value; 0 restores the default.
		if l.Processes != nil {
			st.Sandbox.Processes = *l.Processes
		}
		if l.MemoryBytes != nil {
			st.Sandbox.MemoryBytes = *l.MemoryBytes
		}
		if l.CPUSeconds != nil {
			st.Sandbox.CPUSeconds = *l.CPUSeconds
		}
		if l.TmpBytes != nil {
			st.Sandbox.TmpBytes = *l.TmpBytes
		}
		if l.OutputBytes != nil {
			st.Sandbox.OutputBytes = *l.OutputBytes
		}
		if err := desk.CheckSandboxLimits(st.Sandbox); err != nil {
			return err
		}
	}
	if err := s.AgentStore.SetAgentSettings(r.Context(), ws, st); err != nil {
		return err
	}
	if changed && s.Usage != nil {
		// The store released the budget blocks with the change; the held
		// back work is claimed now rather than at the next poll.
		s.Usage.Wake()
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// tokenBudget reads token_budget: a whole number of tokens, 0 or null for
// none.
func tokenBudget(raw json.RawMessage) (int64, error) {
	if string(raw) == "null" {
		return 0, nil
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, desk.Errorf(desk.EINVALID, "token_budget %s must be a whole number of tokens (0 or null for no budget)", raw)
	}
	return n, desk.CheckTokenBudget(n) // the one check an import makes too
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) error {
	def, models := "", []string{"script"}
	if s.Models != nil {
		def, models = s.Models.Default(), s.Models.Models()
	}
	note := ""
	if def == "" {
		note = "no default model: set DESK_MODEL (openai:<model>, anthropic:<model> or openai-compatible:<base-url>#<model>)"
	}
	writeJSON(w, http.StatusOK, desk.ModelList{Default: def, Models: models, Note: note})
	return nil
}
