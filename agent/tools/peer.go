package tools

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
)

// The peer tools are the workspace manager's (desk.ManagerWorkspaceID):
// they look at the other workspaces read-only and ask them through
// dispatches. They are declared only in the manager's sessions; nothing
// they do writes outside the manager's own workspace.

// managerOnly declares a tool in the workspace manager's sessions only.
type managerOnly struct{}

func (managerOnly) Unavailable(env *Env) string {
	if env.Workspace == nil || env.Workspace.ID != desk.ManagerWorkspaceID {
		return "a workspace manager tool"
	}
	return ""
}

// surfaceScoped: elsewhere their absence is by design, so Absent does not
// list them.
func (managerOnly) surfaceScoped() {}

// Bounds of what a peer tool returns.
const (
	maxPeerSessions = 200
	maxPeerEntries  = 500
	maxPeerFile     = 64 << 10
)

// ---- peer_list ----

type peerListArgs struct{}

type peerList struct {
	managerOnly
	args[peerListArgs]
}

func (peerList) Name() string { return "peer_list" }
func (peerList) Description() string {
	return "List the other workspaces on this desk: id, name, state and how many sessions each has."
}
func (peerList) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t peerList) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	if _, bad, err := t.decode(call.Args); bad != nil || err != nil {
		return bad, err
	}
	ws, err := env.Store.ListWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, w := range ws {
		if w.ID == desk.ManagerWorkspaceID || w.State == desk.WorkspacePurged {
			continue
		}
		xs, err := env.Store.ListSessions(ctx, desk.SessionFilter{WorkspaceID: w.ID})
		if err != nil {
			return nil, err
		}
		out = append(out, map[string]any{"id": w.ID, "name": w.Name, "state": w.State, "sessions": len(xs)})
	}
	return &Result{Value: map[string]any{"workspaces": out}}, nil
}

// ---- peer_sessions ----

type peerSessionsArgs struct {
	WorkspaceID string `json:"workspace_id" jsonschema_description:"the workspace (ws_…) whose sessions to list"`
}

type peerSessions struct {
	managerOnly
	args[peerSessionsArgs]
}

func (peerSessions) Name() string { return "peer_sessions" }
func (peerSessions) Description() string {
	return "List a workspace's sessions, most recent first: id, @signature, title, lifecycle and when it last changed. Ask one with peer_ask."
}
func (peerSessions) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t peerSessions) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	if r := peerWorkspace(ctx, env, a.WorkspaceID); r != nil {
		return r, nil
	}
	xs, err := env.Store.ListSessions(ctx, desk.SessionFilter{WorkspaceID: a.WorkspaceID})
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, min(len(xs), maxPeerSessions))
	for _, x := range xs[:min(len(xs), maxPeerSessions)] {
		out = append(out, map[string]any{"id": x.ID, "signature": x.Signature, "title": x.Title, "lifecycle": x.Lifecycle, "updated_at": x.UpdatedAt})
	}
	v := map[string]any{"sessions": out}
	if len(xs) > maxPeerSessions {
		v["more"] = len(xs) - maxPeerSessions
	}
	return &Result{Value: v}, nil
}

// ---- peer_path ----

type peerPathArgs struct {
	WorkspaceID string `json:"workspace_id" jsonschema_description:"the workspace (ws_…) to look into"`
	Path        string `json:"path,omitempty" jsonschema_description:"a path in its checkout (/workspace in its sessions), relative or absolute; empty or / is the checkout's root"`
}

type peerPath struct {
	managerOnly
	args[peerPathArgs]
}

func (peerPath) Name() string { return "peer_path" }
func (peerPath) Description() string {
	return "Look at a path of another workspace's checkout, read-only: a directory's entries, or the start of a file (64 KiB). Nothing outside that checkout is reachable."
}
func (peerPath) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t peerPath) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	if r := peerWorkspace(ctx, env, a.WorkspaceID); r != nil {
		return r, nil
	}
	p := strings.TrimPrefix(a.Path, "/workspace")
	p = path.Clean("/" + p)
	if strings.IndexByte(p, 0) >= 0 {
		return Fail(CodeBadInput, "path contains a NUL byte"), nil
	}
	rel := strings.TrimPrefix(p, "/")
	if rel == "" {
		rel = "."
	}
	// os.Root confines every step to the checkout: a symbolic link or ..
	// that leads out of it is refused, not followed.
	root, err := os.OpenRoot(env.Home.Abs(a.WorkspaceID, layout.CheckoutDir))
	if err != nil {
		return Fail(CodeNotFound, "workspace %s has no checkout on this node", a.WorkspaceID), nil
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Fail(CodeNotFound, "%s does not exist in %s", p, a.WorkspaceID), nil
		}
		return Fail(CodeDenied, "%s cannot be read: it leads outside the workspace or is not readable", p), nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		ents, err := f.ReadDir(maxPeerEntries + 1)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		var out []map[string]any
		for _, e := range ents[:min(len(ents), maxPeerEntries)] {
			kind := "file"
			switch {
			case e.IsDir():
				kind = "dir"
			case e.Type()&fs.ModeSymlink != 0:
				kind = "symlink"
			}
			m := map[string]any{"name": e.Name(), "type": kind}
			if info, err := e.Info(); err == nil && kind == "file" {
				m["size"] = info.Size()
			}
			out = append(out, m)
		}
		v := map[string]any{"path": p, "type": "dir", "entries": out}
		if len(ents) > maxPeerEntries {
			v["more"] = true
		}
		return &Result{Value: v}, nil
	}
	if !st.Mode().IsRegular() {
		return Fail(CodeDenied, "%s is not a regular file", p), nil
	}
	buf := make([]byte, min(st.Size(), maxPeerFile))
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	buf = buf[:n]
	v := map[string]any{"path": p, "type": "file", "size": st.Size()}
	if utf8.Valid(buf) {
		v["text"] = string(buf)
	} else {
		v["binary"] = true
	}
	if st.Size() > int64(n) {
		v["truncated"] = true
	}
	return &Result{Value: v}, nil
}

// peerWorkspace refuses a workspace id that is not another active
// workspace.
func peerWorkspace(ctx context.Context, env *Env, ws string) *Result {
	if ws == "" {
		return Fail(CodeBadInput, "workspace_id is required")
	}
	if ws == desk.ManagerWorkspaceID {
		return Fail(CodeBadInput, "workspace_id: this is the manager's own workspace; use the ordinary tools")
	}
	w, err := env.Store.GetWorkspace(ctx, ws)
	if err != nil || w.State == desk.WorkspacePurged {
		return Fail(CodeNotFound, "workspace %s does not exist (peer_list lists them)", ws)
	}
	return nil
}

// ---- peer_ask ----

type peerAsk struct {
	managerOnly
	args[askArgs]
}

func (peerAsk) Name() string { return "peer_ask" }
func (peerAsk) Description() string {
	return "Ask a session of another workspace (by @signature or id) or a workspace (a new session there) to do something. Its answer reaches you as a dispatch_reply message with reply caller. Work and edits belong in the target workspace: this is how to get them done."
}
func (peerAsk) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

// Run dispatches with the desk's own authority: the manager coordinates
// every workspace, which its session's actor alone cannot see. The
// dispatch records the manager's turn as the caller.
func (t peerAsk) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	if env.Dispatch == nil {
		return Fail(CodeNotConfigured, "peer_ask needs the dispatch service, which this desk did not give the tools"), nil
	}
	p, _ := desk.PrincipalFrom(ctx)
	elevated := desk.WithPrincipal(ctx, desk.Principal{Admin: true, ActorID: p.ActorID, ActorKind: desk.ActorAgent, WorkspaceID: p.WorkspaceID})
	return askTool{args: t.args}.Run(elevated, env, call)
}
