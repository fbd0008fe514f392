// Package mcpserver is desk's Model Context Protocol server, built on the
// official Go SDK (github.com/modelcontextprotocol/go-sdk). It lets any MCP
// host (Claude Code, Codex, Cursor, …) hand durable work to desk: list and
// create sessions, send them messages and wait for the turn, read and write
// artifacts and files, answer approvals and questions.
//
// Every tool is implemented on desk's Go client (package client), the same
// one the CLI uses, and never on the services directly. Every request runs
// as its caller's client, and so as one bearer token:
//
//   - Streamable HTTP at /mcp (NewHTTPHandler, mounted by package app): one
//     server, built once, serves every MCP session; each request's client
//     carries the bearer token of that request (the one that opened the
//     session) and goes straight to desk's own HTTP handler in process (no
//     socket). The token is checked on every /mcp request, a session can
//     only be used with the token that opened it, and a token keeps at most
//     DefaultSessionsPerToken sessions open (see sessionTable).
//   - stdio (desk mcp, RunStdio): one session, a client over the network
//     with the CLI's address and token rules.
//
// So an actor token sees through MCP exactly what it sees over HTTP, by
// construction: the same authentication, visibility rules and error codes
// apply, and a refused call is a tool error (isError) carrying desk's error
// code and message, never the data.
//
// Tool input and output schemas are generated from Go structs; argument
// names are the HTTP API's. Resources are artifacts
// (desk://sessions/{ses}/artifacts/{art}) and transcripts
// (desk://sessions/{ses}/transcript), with templates, completion of their
// ids, and subscriptions that follow the session's live events.
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a server.
type Options struct {
	Version string
	Logger  *slog.Logger // the server's own diagnostics; nil discards them
}

// backend is desk's MCP server: the tools, prompts and resources, built
// once and shared by every MCP session it serves. Nothing in it belongs to
// one caller: each request finds its caller's client in its context (see
// withCaller), and the only per-session state is the subscriptions a
// session made, created when it subscribes.
type backend struct {
	srv *sdk.Server
	// callerOf is the desk client of a request's caller, nil when the
	// request names none.
	callerOf func(*sdk.RequestExtra) *client.Client
	logger   *slog.Logger

	mu      sync.Mutex
	subs    map[string]*follower        // resource URI → its follower
	watched map[*sdk.ServerSession]bool // sessions whose end drops their subscriptions
	wg      sync.WaitGroup              // followers and session watchers
}

// follower follows one resource's session events for every MCP session
// subscribed to it, with the client of one of them (owner): one event
// stream per resource, so a change is notified once to each subscriber.
type follower struct {
	cancel context.CancelFunc
	owner  *sdk.ServerSession
	subs   map[*sdk.ServerSession]*client.Client
}

// New returns an MCP server whose every tool, resource and prompt talks to
// desk through c.
func New(c *client.Client, o Options) *sdk.Server {
	return newBackend(func(*sdk.RequestExtra) *client.Client { return c }, o).srv
}

func newBackend(callerOf func(*sdk.RequestExtra) *client.Client, o Options) *backend {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		// serverInfo.version is required; a build without one says so.
		o.Version = "dev"
	}
	b := &backend{callerOf: callerOf, logger: o.Logger, subs: map[string]*follower{}, watched: map[*sdk.ServerSession]bool{}}
	b.srv = sdk.NewServer(&sdk.Implementation{Name: "desk", Title: "desk", Version: o.Version}, &sdk.ServerOptions{
		Instructions: "desk is a durable workspace runtime for AI agents. Use workspaces_list and sessions_list to find a session " +
			"(or session_create to start one), session_send with wait:true to hand it a task and get the reply, " +
			"and the artifact and file tools to read what it produced.",
		Logger:             o.Logger,
		CompletionHandler:  b.complete,
		SubscribeHandler:   b.subscribe,
		UnsubscribeHandler: b.unsubscribe,
		SetCacheable:       setCacheable,
		Capabilities: &sdk.ServerCapabilities{
			Logging:     &sdk.LoggingCapabilities{},
			Completions: &sdk.CompletionCapabilities{},
			Resources:   &sdk.ResourceCapabilities{Subscribe: true},
			Tools:       &sdk.ToolCapabilities{},
			Prompts:     &sdk.PromptCapabilities{},
			Extensions:  map[string]any{TasksExtension: map[string]any{}},
		},
	})
	b.addTools(b.srv)
	b.addResources(b.srv)
	b.addPrompts(b.srv)
	b.addTasks(b.srv)
	b.srv.AddReceivingMiddleware(b.withCaller)
	return b
}

// ListTTL is how long a 2026-07-28 client may cache what is the same for
// every caller and changes only with desk's version: server/discover,
// tools/list, prompts/list and resources/templates/list.
const ListTTL = 5 * time.Minute

// setCacheable answers the cache hints (ttlMs, cacheScope) of the
// 2026-07-28 revision. The tool, prompt and template sets are built once
// and shared, so they are public for ListTTL. resources/list and
// resources/read show the caller's own sessions and artifacts, which
// change with every turn: private and immediately stale.
func setCacheable(_ context.Context, req sdk.Request, c *sdk.Cacheable) {
	switch req.(type) {
	case *sdk.ListResourcesRequest, *sdk.ReadResourceRequest:
		c.TTLMs, c.CacheScope = 0, "private"
	default:
		c.TTLMs, c.CacheScope = int(ListTTL/time.Millisecond), "public"
	}
}

// callerKey is the context key of a request's desk client.
type callerKey struct{}

// withCaller puts the request's caller (its desk client) into the context
// every handler gets, and answers resources/list, which depends on the
// caller: resources come and go with sessions, so none is registered up
// front. A request without a caller is refused.
func (b *backend) withCaller(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		c := b.callerOf(req.GetExtra())
		if c == nil {
			return nil, desk.Errorf(desk.EUNAUTHORIZED, "the request carries no desk token")
		}
		ctx = context.WithValue(ctx, callerKey{}, c)
		if method == "resources/list" {
			return b.listResources(ctx)
		}
		if in, ok := wantsTask(req); ok {
			return b.createTask(ctx, in)
		}
		return next(ctx, method, req)
	}
}

// caller is the desk client withCaller put into ctx.
func caller(ctx context.Context) *client.Client {
	return ctx.Value(callerKey{}).(*client.Client)
}

// wait waits for the followers and session watchers to end; they end
// when their sessions close.
func (b *backend) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Resource URIs.
const (
	artifactTemplate   = "desk://sessions/{ses}/artifacts/{art}"
	transcriptTemplate = "desk://sessions/{ses}/transcript"
)

func artifactURI(ses, art string) string {
	return "desk://sessions/" + url.PathEscape(ses) + "/artifacts/" + url.PathEscape(art)
}

func transcriptURI(ses string) string {
	return "desk://sessions/" + url.PathEscape(ses) + "/transcript"
}

// parseURI splits a desk:// URI into its session and, for an artifact, its
// artifact id; ok is false for anything else.
func parseURI(uri string) (ses, art string, ok bool) {
	rest, found := strings.CutPrefix(uri, "desk://sessions/")
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 2 && parts[1] == "transcript" && parts[0] != "":
		return parts[0], "", true
	case len(parts) == 3 && parts[1] == "artifacts" && parts[0] != "" && parts[2] != "":
		return parts[0], parts[2], true
	}
	return "", "", false
}

// maxListedResources bounds resources/list: it walks every visible
// workspace and session, so a large desk is listed up to this many
// entries (the templates reach the rest).
const maxListedResources = 1000

func (b *backend) addResources(s *sdk.Server) {
	s.AddResourceTemplate(&sdk.ResourceTemplate{
		Name: "artifact", Title: "A session's artifact", URITemplate: artifactTemplate,
		Description: "An artifact of a desk session: text for text kinds, a blob otherwise, with its media type.",
	}, b.readResource)
	s.AddResourceTemplate(&sdk.ResourceTemplate{
		Name: "transcript", Title: "A session's transcript", URITemplate: transcriptTemplate,
		Description: "The orchestrator transcript of a desk session as Markdown.", MIMEType: "text/markdown",
	}, b.readResource)
}

func (b *backend) listResources(ctx context.Context) (*sdk.ListResourcesResult, error) {
	// The caller's own sessions and artifacts, changing with every turn:
	// private and immediately stale (setCacheable is not consulted for a
	// result answered here, before the SDK's own handler).
	res := &sdk.ListResourcesResult{Resources: []*sdk.Resource{}, Cacheable: sdk.Cacheable{TTLMs: 0, CacheScope: "private"}}
	wss, err := caller(ctx).ListWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	for _, ws := range wss {
		ss, err := caller(ctx).ListSessions(ctx, ws.ID, client.SessionFilter{})
		if err != nil {
			return nil, err
		}
		for _, x := range ss {
			if len(res.Resources) >= maxListedResources {
				return res, nil
			}
			res.Resources = append(res.Resources, &sdk.Resource{URI: transcriptURI(x.ID), Name: x.ID + "/transcript",
				Title: "Transcript of " + orID(x.Title, x.ID), MIMEType: "text/markdown"})
			as, err := caller(ctx).ListArtifacts(ctx, x.ID)
			if err != nil {
				return nil, err
			}
			for _, a := range as {
				if len(res.Resources) >= maxListedResources {
					return res, nil
				}
				res.Resources = append(res.Resources, &sdk.Resource{URI: artifactURI(x.ID, a.ID), Name: a.Name,
					Title: a.Name + " (" + orID(x.Title, x.ID) + ")", MIMEType: a.MediaType, Size: a.Size})
			}
		}
	}
	return res, nil
}

func orID(title, id string) string {
	if title != "" {
		return title
	}
	return id
}

// readResource reads an artifact or a transcript. An unknown URI, or one
// the token may not see, is the protocol's resource-not-found error.
func (b *backend) readResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	ses, art, ok := parseURI(uri)
	if !ok {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if art == "" {
		ms, err := caller(ctx).Transcript(ctx, ses, client.TranscriptOptions{Limit: 500})
		if err != nil {
			return nil, resourceError(uri, err)
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "text/markdown", Text: renderTranscript(ms)}}}, nil
	}
	a, data, err := b.readArtifact(ctx, ses, art)
	if err != nil {
		return nil, resourceError(uri, err)
	}
	rc := &sdk.ResourceContents{URI: uri, MIMEType: a.MediaType}
	if isText(a.Kind, a.MediaType, data) {
		rc.Text = string(data)
	} else {
		rc.Blob = data
		if len(data) == 0 {
			rc.Blob = []byte{}
		}
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{rc}}, nil
}

func resourceError(uri string, err error) error {
	switch desk.ErrorCode(err) {
	case desk.ENOTFOUND, desk.EFORBIDDEN:
		return sdk.ResourceNotFoundError(uri)
	}
	return toolError(err)
}

// renderTranscript writes messages as Markdown, one section a message.
func renderTranscript(ms []*desk.Message) string {
	var sb strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&sb, "### %s · %s\n\n", m.Role, m.CreatedAt.UTC().Format("2006-01-02 15:04:05Z"))
		if m.Text != "" {
			sb.WriteString(m.Text)
			sb.WriteString("\n\n")
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&sb, "- tool call `%s` %s\n", c.Name, c.Arguments)
		}
		if len(m.ToolCalls) > 0 {
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

// subscribe follows the session's live events and notifies the resource
// when its artifact changes (or, for a transcript, when the assistant
// answers), until every subscriber unsubscribed or ended its MCP session.
func (b *backend) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	ses, art, ok := parseURI(uri)
	if !ok {
		return sdk.ResourceNotFoundError(uri)
	}
	// Refuse what the token cannot see, as a read would.
	c := caller(ctx)
	var err error
	if art != "" {
		_, err = c.GetArtifact(ctx, ses, art)
	} else {
		_, err = c.GetSession(ctx, ses)
	}
	if err != nil {
		return resourceError(uri, err)
	}
	ss := req.Session
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.subs[uri]
	if f == nil {
		f = &follower{subs: map[*sdk.ServerSession]*client.Client{}}
		b.subs[uri] = f
	}
	f.subs[ss] = c
	if f.cancel == nil {
		b.startFollower(uri, f, ss, c)
	}
	if ss != nil && !b.watched[ss] {
		b.watched[ss] = true
		b.wg.Go(func() {
			_ = ss.Wait()
			b.dropSession(ss)
		})
	}
	return nil
}

// startFollower starts f's event stream with the client of owner.
// Called with b.mu held.
func (b *backend) startFollower(uri string, f *follower, owner *sdk.ServerSession, c *client.Client) {
	ses, art, _ := parseURI(uri)
	fctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.owner = cancel, owner
	b.wg.Go(func() { b.follow(fctx, c, uri, ses, art) })
}

// leave removes ss from the subscribers of uri: the last one stops the
// follower, and the owner's leaving hands it to another subscriber's
// client. Called with b.mu held.
func (b *backend) leave(uri string, ss *sdk.ServerSession) {
	f := b.subs[uri]
	if f == nil {
		return
	}
	if _, ok := f.subs[ss]; !ok {
		return
	}
	delete(f.subs, ss)
	if len(f.subs) == 0 {
		f.cancel()
		delete(b.subs, uri)
		return
	}
	if f.owner == ss {
		f.cancel()
		for next, c := range f.subs {
			b.startFollower(uri, f, next, c)
			break
		}
	}
}

// dropSession forgets the subscriptions of an MCP session that ended.
func (b *backend) dropSession(ss *sdk.ServerSession) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.watched, ss)
	for uri := range b.subs {
		b.leave(uri, ss)
	}
}

func (b *backend) follow(ctx context.Context, c *client.Client, uri, ses, art string) {
	err := c.Events(ctx, client.EventFilter{Session: ses}, -1, func(e *desk.Event) error {
		changed := false
		switch {
		case art != "" && strings.HasPrefix(e.Type, "artifact."):
			var a struct {
				ID string `json:"id"`
			}
			changed = json.Unmarshal(e.Data, &a) == nil && a.ID == art
		case art == "" && e.Type == "assistant.message":
			changed = true
		}
		if changed {
			if err := b.srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
				b.logger.Warn("resource update not sent", "uri", uri, "err", err)
			}
		}
		return nil
	})
	if ctx.Err() == nil && err != nil {
		b.logger.Warn("resource subscription ended", "uri", uri, "err", err)
	}
}

func (b *backend) unsubscribe(_ context.Context, req *sdk.UnsubscribeRequest) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.leave(req.Params.URI, req.Session)
	return nil
}

// maxCompletions is the spec's limit on values in one completion.
const maxCompletions = 100

// complete completes the ids of the resource templates (ses, art) and of
// the delegate prompt's workspace_id, from what this token can see.
func (b *backend) complete(ctx context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
	p := req.Params
	prefix := p.Argument.Value
	var vals []string
	var err error
	switch p.Argument.Name {
	case "ses":
		vals, err = b.sessionIDs(ctx)
	case "art":
		if p.Context != nil && p.Context.Arguments["ses"] != "" {
			var as []*desk.Artifact
			as, err = caller(ctx).ListArtifacts(ctx, p.Context.Arguments["ses"])
			for _, a := range as {
				vals = append(vals, a.ID)
			}
		}
	case "workspace_id":
		var wss []*desk.Workspace
		wss, err = caller(ctx).ListWorkspaces(ctx)
		for _, w := range wss {
			vals = append(vals, w.ID)
		}
	}
	if err != nil && desk.ErrorCode(err) != desk.ENOTFOUND && desk.ErrorCode(err) != desk.EFORBIDDEN {
		return nil, err
	}
	res := &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{}}}
	for _, v := range vals {
		if strings.HasPrefix(v, prefix) {
			res.Completion.Values = append(res.Completion.Values, v)
		}
	}
	res.Completion.Total = len(res.Completion.Values)
	if len(res.Completion.Values) > maxCompletions {
		res.Completion.Values, res.Completion.HasMore = res.Completion.Values[:maxCompletions], true
	}
	return res, nil
}

func (b *backend) sessionIDs(ctx context.Context) ([]string, error) {
	wss, err := caller(ctx).ListWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, w := range wss {
		ss, err := caller(ctx).ListSessions(ctx, w.ID, client.SessionFilter{})
		if err != nil {
			return nil, err
		}
		for _, x := range ss {
			ids = append(ids, x.ID)
		}
	}
	return ids, nil
}

func (b *backend) addPrompts(s *sdk.Server) {
	s.AddPrompt(&sdk.Prompt{
		Name: "delegate", Title: "Delegate to desk",
		Description: "Hand this task to a desk session: create (or reuse) a session, send it the task, wait for the reply.",
		Arguments: []*sdk.PromptArgument{
			{Name: "task", Description: "what the desk session should do", Required: true},
			{Name: "workspace_id", Description: "the workspace to work in (ws_…); default: the first one workspaces_list shows"},
			{Name: "session_id", Description: "an existing session to continue instead of creating one"},
		},
	}, func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		a := req.Params.Arguments
		task := strings.TrimSpace(a["task"])
		if task == "" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "delegate: argument task is required"}
		}
		var steps []string
		switch {
		case a["session_id"] != "":
			steps = append(steps, fmt.Sprintf("Use the existing desk session %s.", a["session_id"]))
		case a["workspace_id"] != "":
			steps = append(steps, fmt.Sprintf("Create a desk session in workspace %s with session_create (a short title for the task).", a["workspace_id"]))
		default:
			steps = append(steps, "Find the workspace with workspaces_list, then create a desk session there with session_create (a short title for the task).")
		}
		steps = append(steps,
			"Send it the task below with session_send and wait: true; it runs durably in desk and returns the reply.",
			"If the reply says it is waiting for an approval or an answer, show it with approvals_list or input_requests_list and ask me before answering.",
			"Read what it produced with artifacts_list and artifact_read, and summarise it for me.")
		text := "Hand this task to desk.\n\n" + strings.Join(numbered(steps), "\n") + "\n\nTask:\n" + task
		return &sdk.GetPromptResult{
			Description: "Delegate a task to a desk session",
			Messages:    []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: text}}},
		}, nil
	})
}

func numbered(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%d. %s", i+1, s)
	}
	return out
}
