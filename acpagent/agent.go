// Package acpagent is desk as an Agent Client Protocol agent: an editor
// (Zed, or any ACP client) starts `desk acp` and speaks JSON-RPC over its
// stdio; every ACP session is a desk session, every prompt an ordinary
// queued message whose turn streams back as session/update notifications,
// session/cancel interrupts exactly that turn's execution, and desk's
// approvals become session/request_permission requests to the editor.
//
// It is built on the ACP Go SDK (github.com/coder/acp-go-sdk) and, like
// `desk mcp`, on desk's Go client: it talks to a running desk over HTTP
// with one token, so it sees exactly what that token sees. It owns no
// state of its own beyond the sessions opened on this connection.
package acpagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

// Options configure the agent.
type Options struct {
	// Workspace is the workspace (id or name) session/new creates sessions
	// in; empty means the only workspace the token sees.
	Workspace string
	// Model and Script are the new sessions' model and, for the script
	// model, its script (as desk session create --model/--script).
	Model  string
	Script json.RawMessage
	// Version is desk's version, reported in initialize.
	Version string
	// MaxMessageBytes bounds one incoming message; 0 means
	// DefaultMaxMessageBytes.
	MaxMessageBytes int
	Logger          *slog.Logger
}

// replayLimit is how many of a session's newest messages session/load
// replays.
const replayLimit = 500

// stopWait bounds how long a cancelled prompt waits for its execution to
// settle after the interrupt.
const stopWait = 30 * time.Second

// Run serves ACP on in and out until the client closes in or ctx ends.
// Every desk call goes through c.
func Run(ctx context.Context, c *client.Client, in io.Reader, out io.Writer, o Options) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	a := &agent{ctx: ctx, c: c, o: o, log: o.Logger, sessions: map[string]*session{}}
	a.conn = acp.NewAgentSideConnection(a, w, pr)
	a.conn.SetLogger(o.Logger)
	gated := make(chan error, 1)
	go func() {
		err := gate(in, pw, w, o.MaxMessageBytes, o.Logger)
		pw.Close()
		gated <- err
	}()
	var err error
	select {
	case <-a.conn.Done():
		err = <-gated // the connection ends only after the gate closed its input
	case <-ctx.Done():
		// The gate may be blocked reading stdin; it ends with the process.
	}
	cancel()
	pr.Close()
	a.wg.Wait()
	return err
}

// agent implements the SDK's Agent (and AgentLoader).
type agent struct {
	ctx  context.Context // the connection's lifetime
	c    *client.Client
	o    Options
	log  *slog.Logger
	conn *acp.AgentSideConnection
	wg   sync.WaitGroup // running prompts

	mu       sync.Mutex
	ws       string // the resolved workspace, once known
	sessions map[string]*session
}

// session is one desk session opened on this connection.
type session struct {
	id string
	mu sync.Mutex
	// cancel is the cancel of the running prompt's turn, set while one
	// runs.
	cancel chan struct{}
}

var (
	_ acp.Agent       = (*agent)(nil)
	_ acp.AgentLoader = (*agent)(nil)
)

func (a *agent) Initialize(_ context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	v := acp.ProtocolVersion(acp.ProtocolVersionNumber)
	if p.ProtocolVersion < v {
		v = p.ProtocolVersion
	}
	return acp.InitializeResponse{
		ProtocolVersion: v,
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: acp.PromptCapabilities{EmbeddedContext: true},
			// Stabilised in ACP: an editor reattaches to a desk session
			// (resume, without a replay), lists the sessions it could
			// reattach to, and closes what it no longer follows.
			SessionCapabilities: acp.SessionCapabilities{
				Resume: &acp.SessionResumeCapabilities{},
				List:   &acp.SessionListCapabilities{},
				Close:  &acp.SessionCloseCapabilities{},
			},
		},
		AgentInfo:   &acp.Implementation{Name: "desk", Title: acp.Ptr("desk"), Version: a.o.Version},
		AuthMethods: []acp.AuthMethod{},
	}, nil
}

func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

// workspace resolves Options.Workspace (an id or a name) once.
func (a *agent) workspace(ctx context.Context) (string, error) {
	a.mu.Lock()
	ws := a.ws
	a.mu.Unlock()
	if ws != "" {
		return ws, nil
	}
	all, err := a.c.ListWorkspaces(ctx)
	if err != nil {
		return "", rpcError(err)
	}
	var names []string
	for _, w := range all {
		names = append(names, w.Name)
		if a.o.Workspace != "" && (w.ID == a.o.Workspace || w.Name == a.o.Workspace) {
			ws = w.ID
		}
	}
	switch {
	case ws != "":
	case a.o.Workspace != "":
		return "", acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("no workspace %q visible to this token", a.o.Workspace)})
	case len(all) == 1:
		ws = all[0].ID
	default:
		return "", acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("this token sees %d workspaces (%s): start desk acp with --workspace WS", len(all), strings.Join(names, ", "))})
	}
	a.mu.Lock()
	a.ws = ws
	a.mu.Unlock()
	return ws, nil
}

func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	ws, err := a.workspace(ctx)
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	title := "ACP session"
	if p.Cwd != "" {
		title = "ACP: " + filepath.Base(p.Cwd)
	}
	s, err := a.c.CreateSession(ctx, ws, client.SessionCreate{Title: title, Model: a.o.Model, Script: a.o.Script})
	if err != nil {
		return acp.NewSessionResponse{}, rpcError(err)
	}
	a.open(s.ID)
	a.log.Info("session created", "session", s.ID, "workspace", ws)
	return acp.NewSessionResponse{SessionId: acp.SessionId(s.ID)}, nil
}

func (a *agent) open(id string) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[id]
	if s == nil {
		s = &session{id: id}
		a.sessions[id] = s
	}
	return s
}

// LoadSession opens an existing desk session and replays its transcript
// (the newest replayLimit messages) as session/update notifications
// before answering, as the protocol requires.
func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	id := string(p.SessionId)
	if _, err := a.c.GetSession(ctx, id); err != nil {
		return acp.LoadSessionResponse{}, rpcError(err)
	}
	ms, err := a.c.Transcript(ctx, id, client.TranscriptOptions{Limit: replayLimit})
	if err != nil {
		return acp.LoadSessionResponse{}, rpcError(err)
	}
	a.open(id)
	for _, m := range ms {
		for _, u := range replay(m) {
			if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
				return acp.LoadSessionResponse{}, err
			}
		}
	}
	a.log.Info("session loaded", "session", id, "messages", len(ms))
	return acp.LoadSessionResponse{}, nil
}

func (a *agent) session(id acp.SessionId) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[string(id)]
	if s == nil {
		return nil, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("session %s is not open on this connection: session/new or session/load it first", id)})
	}
	return s, nil
}

// Cancel interrupts the turn the session's running prompt waits for.
func (a *agent) Cancel(_ context.Context, p acp.CancelNotification) error {
	s, err := a.session(p.SessionId)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		close(s.cancel)
		s.cancel = nil
	}
	return nil
}

// Prompt queues the prompt as an ordinary message and follows its turn.
func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	s, err := a.session(p.SessionId)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	text := promptText(p.Prompt)
	if strings.TrimSpace(text) == "" {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"error": "the prompt has no text"})
	}
	a.wg.Add(1)
	defer a.wg.Done()
	cancelled := make(chan struct{})
	s.mu.Lock()
	if s.cancel != nil {
		close(s.cancel) // a newer prompt replaces the older one's claim
	}
	s.cancel = cancelled
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.cancel == cancelled {
			s.cancel = nil
		}
		s.mu.Unlock()
	}()
	res, err := a.c.Send(ctx, s.id, client.SubmitInput{Text: text})
	if err != nil {
		return acp.PromptResponse{}, rpcError(err)
	}
	t := &turn{a: a, ses: s.id, sid: p.SessionId, res: res, exe: res.ExecutionID,
		calls: map[string]*call{}, byCommand: map[string]*call{}, asks: map[string]context.CancelFunc{}}
	return t.follow(ctx, cancelled)
}

// promptText joins the prompt's text: text blocks, embedded text
// resources (with their URI) and links to resources.
func promptText(blocks []acp.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		switch {
		case b.Text != nil:
			parts = append(parts, b.Text.Text)
		case b.Resource != nil && b.Resource.Resource.TextResourceContents != nil:
			r := b.Resource.Resource.TextResourceContents
			parts = append(parts, fmt.Sprintf("<resource uri=%q>\n%s\n</resource>", r.Uri, r.Text))
		case b.ResourceLink != nil:
			parts = append(parts, fmt.Sprintf("[%s](%s)", b.ResourceLink.Name, b.ResourceLink.Uri))
		}
	}
	return strings.Join(parts, "\n\n")
}

// listPage is how many sessions one session/list answer carries.
const listPage = 100

// ListSessions lists the workspace's desk sessions, most recently updated
// first, a page at a time (the cursor is the offset of the next page, and
// opaque to the editor). desk sessions have no host directory: their files
// are the guest's /workspace, which is the cwd every entry names, so a cwd
// filter other than /workspace matches nothing.
func (a *agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	ws, err := a.workspace(ctx)
	if err != nil {
		return acp.ListSessionsResponse{}, err
	}
	from := 0
	if p.Cursor != nil {
		n, err := strconv.Atoi(*p.Cursor)
		if err != nil || n < 0 {
			return acp.ListSessionsResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("cursor %q is not one this agent gave", *p.Cursor)})
		}
		from = n
	}
	out := acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	if p.Cwd != nil && *p.Cwd != guestCwd {
		return out, nil
	}
	all, err := a.c.ListSessions(ctx, ws, client.SessionFilter{})
	if err != nil {
		return acp.ListSessionsResponse{}, rpcError(err)
	}
	for i := from; i < len(all) && i < from+listPage; i++ {
		x := all[i]
		out.Sessions = append(out.Sessions, acp.SessionInfo{SessionId: acp.SessionId(x.ID), Cwd: guestCwd,
			Title: acp.Ptr(x.Title), UpdatedAt: acp.Ptr(x.UpdatedAt.UTC().Format(time.RFC3339Nano))})
	}
	if from+listPage < len(all) {
		out.NextCursor = acp.Ptr(strconv.Itoa(from + listPage))
	}
	return out, nil
}

// guestCwd is the directory a desk session's agent works in.
const guestCwd = "/workspace"

// ResumeSession reattaches this connection to an existing desk session
// without replaying its transcript (session/load replays it). The
// session's turns, queue and history are desk's, so a session survives
// desk's restarts and the editor's alike.
func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	id := string(p.SessionId)
	if _, err := a.c.GetSession(ctx, id); err != nil {
		return acp.ResumeSessionResponse{}, rpcError(err)
	}
	a.open(id)
	a.log.Info("session resumed", "session", id)
	return acp.ResumeSessionResponse{}, nil
}

// CloseSession ends this connection's hold on a session: a running prompt
// is cancelled as session/cancel would (its turn is interrupted), and the
// session must be resumed or loaded again before the next prompt. The desk
// session itself stays, with its history.
func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	if err := a.Cancel(ctx, acp.CancelNotification{SessionId: p.SessionId}); err != nil {
		return acp.CloseSessionResponse{}, err
	}
	a.mu.Lock()
	delete(a.sessions, string(p.SessionId))
	a.mu.Unlock()
	a.log.Info("session closed", "session", p.SessionId)
	return acp.CloseSessionResponse{}, nil
}

// The methods desk does not offer: the SDK's Agent interface has them,
// the capabilities do not declare them.
func (a *agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}

func (a *agent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

// rpcError maps desk's error taxonomy onto JSON-RPC: what the caller got
// wrong (bad input, unknown or refused ids) is invalid params, the rest an
// internal error; both carry desk's code and message.
func rpcError(err error) error {
	var de *desk.Error
	if !errors.As(err, &de) {
		return acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	data := map[string]any{"code": de.Code, "error": de.Error()}
	switch de.Code {
	case desk.EINVALID, desk.ENOTFOUND, desk.EFORBIDDEN, desk.ECONFLICT, desk.ETOOLARGE:
		return &acp.RequestError{Code: codeInvalidParams, Message: "Invalid params: " + de.Error(), Data: data}
	}
	return &acp.RequestError{Code: -32603, Message: "Internal error: " + de.Error(), Data: data}
}
