package client

import (
	"context"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/desk-runtime/desk"
)

// Health asks the server whether it is serving and returns its version. It
// needs no token.
func (c *Client) Health(ctx context.Context) (string, error) {
	var out desk.Health
	if err := c.doJSON(ctx, http.MethodGet, "/healthz", nil, &out); err != nil {
		return "", err
	}
	return out.Version, nil
}

// Workspaces and actors.

// CreateWorkspace creates a workspace (admin token only). A name another
// workspace has is refused with ECONFLICT; CreateWorkspaceWith can allow it.
func (c *Client) CreateWorkspace(ctx context.Context, name string) (*desk.Workspace, error) {
	return c.CreateWorkspaceWith(ctx, WorkspaceCreate{WorkspaceCreate: desk.WorkspaceCreate{Name: name}})
}

// WorkspaceCreate is the body of POST /v1/workspaces. Template fills
// checkout/ from a registered template: "name" (the version registered
// last) or "name@version"; empty for none.
type WorkspaceCreate = desk.WorkspaceCreateRequest

// CreateWorkspaceWith creates a workspace as in describes (admin token only).
func (c *Client) CreateWorkspaceWith(ctx context.Context, in WorkspaceCreate) (*desk.Workspace, error) {
	var w desk.Workspace
	if err := c.doJSON(ctx, http.MethodPost, "/v1/workspaces", in, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// ListWorkspaces lists the workspaces the token can see.
func (c *Client) ListWorkspaces(ctx context.Context) ([]*desk.Workspace, error) {
	var out desk.WorkspaceList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/workspaces", nil, &out); err != nil {
		return nil, err
	}
	return out.Workspaces, nil
}

// GetWorkspace returns one workspace.
func (c *Client) GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error) {
	var w desk.Workspace
	if err := c.doJSON(ctx, http.MethodGet, "/v1/workspaces/"+esc(id), nil, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// CreateActor creates an actor of kind "human" or "agent" (empty lets the
// server choose) and returns it with its token, which is shown only once.
func (c *Client) CreateActor(ctx context.Context, ws, name, kind string) (*desk.Actor, string, error) {
	var out desk.ActorCreated
	in := desk.ActorCreate{Name: name, Kind: kind}
	if err := c.doJSON(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/actors", in, &out); err != nil {
		return nil, "", err
	}
	if out.Actor == nil {
		return nil, "", desk.Errorf(desk.EINTERNAL, "server answered without an actor")
	}
	return out.Actor, out.Token, nil
}

// ListActors lists a workspace's actors (an actor token sees only itself).
func (c *Client) ListActors(ctx context.Context, ws string) ([]*desk.Actor, error) {
	var out desk.ActorList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/workspaces/"+esc(ws)+"/actors", nil, &out); err != nil {
		return nil, err
	}
	return out.Actors, nil
}

// Sessions.

// SessionCreate is the input of CreateSession. Actor is an actor id or name;
// empty means the caller's own actor (the workspace owner for the admin).
type SessionCreate = desk.SessionCreateRequest

// CreateSession creates a session in the workspace.
func (c *Client) CreateSession(ctx context.Context, ws string, in SessionCreate) (*desk.Session, error) {
	var s desk.Session
	if err := c.doJSON(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/sessions", in, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SessionFilter selects sessions in ListSessions; nil fields do not filter.
type SessionFilter struct {
	Pinned, Archived *bool
}

// ListSessions lists a workspace's sessions, most recently updated first.
func (c *Client) ListSessions(ctx context.Context, ws string, f SessionFilter) ([]*desk.Session, error) {
	q := url.Values{}
	if f.Pinned != nil {
		q.Set("pinned", strconv.FormatBool(*f.Pinned))
	}
	if f.Archived != nil {
		q.Set("archived", strconv.FormatBool(*f.Archived))
	}
	var out desk.SessionList
	if err := c.doJSON(ctx, http.MethodGet, withQuery("/v1/workspaces/"+esc(ws)+"/sessions", q), nil, &out); err != nil {
		return nil, err
	}
	return out.Sessions, nil
}

// GetSession returns one session.
func (c *Client) GetSession(ctx context.Context, id string) (*desk.Session, error) {
	var s desk.Session
	if err := c.doJSON(ctx, http.MethodGet, "/v1/sessions/"+esc(id), nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SessionPatch changes a session's mutable fields; nil fields stay.
type SessionPatch = desk.SessionPatch

// UpdateSession renames, pins, archives or marks a session unread.
func (c *Client) UpdateSession(ctx context.Context, id string, p SessionPatch) (*desk.Session, error) {
	var s desk.Session
	if err := c.doJSON(ctx, http.MethodPatch, "/v1/sessions/"+esc(id), p, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteSession deletes a session with its artifacts, bindings and scratch.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/sessions/"+esc(id), nil, nil)
}

// Artifacts.

// PutOptions are the options of PutArtifact. MediaType is a hint; the bytes
// decide the kind.
type PutOptions struct {
	Immutable bool
	MediaType string
}

func artifactsPath(ses string) string { return "/v1/sessions/" + esc(ses) + "/artifacts" }

func artifactPath(ses, art string) string { return artifactsPath(ses) + "/" + esc(art) }

func mediaTypeOr(mt string) string {
	if mt == "" {
		return "application/octet-stream"
	}
	return mt
}

// PutArtifact stores body as a new artifact of the session. size is the
// body's length or -1; when known it is sent as Content-Length, so the
// server streams the body knowing how much is coming. The body is streamed,
// never held in memory.
func (c *Client) PutArtifact(ctx context.Context, ses, name string, body io.Reader, size int64, o PutOptions) (*desk.Artifact, error) {
	q := url.Values{"name": {name}}
	if o.Immutable {
		q.Set("immutable", "true")
	}
	resp, err := c.send(ctx, request{method: http.MethodPost, path: withQuery(artifactsPath(ses), q),
		body: nonNilBody(body), size: size, contentType: mediaTypeOr(o.MediaType)})
	if err != nil {
		return nil, err
	}
	var a desk.Artifact
	if err := decodeBody(resp, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// UpdateArtifact replaces an artifact's bytes: same id, next revision.
func (c *Client) UpdateArtifact(ctx context.Context, ses, art string, body io.Reader, size int64, mediaType string) (*desk.Artifact, error) {
	resp, err := c.send(ctx, request{method: http.MethodPut, path: artifactPath(ses, art) + "/content",
		body: nonNilBody(body), size: size, contentType: mediaTypeOr(mediaType)})
	if err != nil {
		return nil, err
	}
	var a desk.Artifact
	if err := decodeBody(resp, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// ListArtifacts lists the session's artifacts, oldest first.
func (c *Client) ListArtifacts(ctx context.Context, ses string) ([]*desk.Artifact, error) {
	var out desk.ArtifactList
	if err := c.doJSON(ctx, http.MethodGet, artifactsPath(ses), nil, &out); err != nil {
		return nil, err
	}
	return out.Artifacts, nil
}

// GetArtifact returns an artifact's metadata.
func (c *Client) GetArtifact(ctx context.Context, ses, art string) (*desk.Artifact, error) {
	var a desk.Artifact
	if err := c.doJSON(ctx, http.MethodGet, artifactPath(ses, art), nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// OpenArtifact streams an artifact's bytes; the caller closes body. size is
// the Content-Length, or -1 when the server did not send one. A connection
// lost mid-transfer surfaces as a read error (io.ErrUnexpectedEOF when the
// length was known), never as a short successful read.
func (c *Client) OpenArtifact(ctx context.Context, ses, art string) (io.ReadCloser, int64, error) {
	d, err := c.DownloadArtifact(ctx, ses, art)
	if err != nil {
		return nil, -1, err
	}
	return d.Body, d.Size, nil
}

// Download is an artifact's content being streamed, with what the response
// says about it. The caller closes Body.
type Download struct {
	Body io.ReadCloser
	// Size is the Content-Length, or -1 when unknown.
	Size int64
	// SHA256 is the hex digest of exactly these bytes (the ETag), so a
	// caller can verify the transfer even if the artifact changes later.
	SHA256    string
	MediaType string
	// Name is the artifact's file name from Content-Disposition.
	Name string
}

// DownloadArtifact is OpenArtifact with the response's metadata.
func (c *Client) DownloadArtifact(ctx context.Context, ses, art string) (*Download, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: artifactPath(ses, art) + "/content", size: -1})
	if err != nil {
		return nil, err
	}
	d := &Download{Body: resp.Body, Size: resp.ContentLength, MediaType: resp.Header.Get("Content-Type")}
	if et := resp.Header.Get("ETag"); et != "" {
		if u, err := strconv.Unquote(strings.TrimPrefix(et, "W/")); err == nil {
			d.SHA256 = u
		}
	}
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		d.Name = params["filename"]
	}
	return d, nil
}

// RevertArtifact restores the previous revision's bytes as a new revision
// (ECONFLICT when there is none).
func (c *Client) RevertArtifact(ctx context.Context, ses, art string) (*desk.Artifact, error) {
	var a desk.Artifact
	if err := c.doJSON(ctx, http.MethodPost, artifactPath(ses, art)+"/revert", nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// DeleteArtifact deletes an artifact: bytes, kept revision and row.
func (c *Client) DeleteArtifact(ctx context.Context, ses, art string) error {
	return c.doJSON(ctx, http.MethodDelete, artifactPath(ses, art), nil, nil)
}

// Selection groups.

// CreateGroup creates a selection group in the workspace.
func (c *Client) CreateGroup(ctx context.Context, ws, name string) (*desk.Group, error) {
	var g desk.Group
	if err := c.doJSON(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/groups", desk.GroupCreate{Name: name}, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// ListGroups lists the workspace's selection groups.
func (c *Client) ListGroups(ctx context.Context, ws string) ([]*desk.Group, error) {
	var out desk.GroupList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/workspaces/"+esc(ws)+"/groups", nil, &out); err != nil {
		return nil, err
	}
	return out.Groups, nil
}

// GetGroup returns a group with its items.
func (c *Client) GetGroup(ctx context.Context, grp string) (*desk.Group, []*desk.Item, error) {
	var out desk.GroupWithItems
	if err := c.doJSON(ctx, http.MethodGet, "/v1/groups/"+esc(grp), nil, &out); err != nil {
		return nil, nil, err
	}
	if out.Group == nil {
		out.Group = &desk.Group{}
	}
	return out.Group, out.Items, nil
}

// DeleteGroup deletes a group; its bindings go with it.
func (c *Client) DeleteGroup(ctx context.Context, grp string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/groups/"+esc(grp), nil, nil)
}

func itemsPath(grp string) string { return "/v1/groups/" + esc(grp) + "/items" }

// AddTextItem adds a captured text to the group; name may be empty.
func (c *Client) AddTextItem(ctx context.Context, grp, name, text string) (*desk.Item, error) {
	in := desk.ItemCreateRequest{Text: &text, Name: name}
	var it desk.Item
	if err := c.doJSON(ctx, http.MethodPost, itemsPath(grp), in, &it); err != nil {
		return nil, err
	}
	return &it, nil
}

// AddURLItem adds a URL to the group; title may be empty.
func (c *Client) AddURLItem(ctx context.Context, grp, rawURL, title string) (*desk.Item, error) {
	in := desk.ItemCreateRequest{URL: rawURL, Title: title}
	var it desk.Item
	if err := c.doJSON(ctx, http.MethodPost, itemsPath(grp), in, &it); err != nil {
		return nil, err
	}
	return &it, nil
}

// AddFileItem adds a file's bytes to the group under name. size is the
// body's length or -1.
func (c *Client) AddFileItem(ctx context.Context, grp, name string, body io.Reader, size int64) (*desk.Item, error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	resp, err := c.send(ctx, request{method: http.MethodPost, path: withQuery(itemsPath(grp), q),
		body: nonNilBody(body), size: size, contentType: "application/octet-stream"})
	if err != nil {
		return nil, err
	}
	var it desk.Item
	if err := decodeBody(resp, &it); err != nil {
		return nil, err
	}
	return &it, nil
}

// RemoveItem removes an item from the group.
func (c *Client) RemoveItem(ctx context.Context, grp, item string) error {
	return c.doJSON(ctx, http.MethodDelete, itemsPath(grp)+"/"+esc(item), nil, nil)
}

// SetBindings replaces the groups the session binds; an empty list clears
// them. It returns the groups now bound.
func (c *Client) SetBindings(ctx context.Context, ses string, groupIDs []string) ([]*desk.Group, error) {
	if groupIDs == nil {
		groupIDs = []string{}
	}
	in := desk.BindingsPut{GroupIDs: groupIDs}
	var out desk.GroupList
	if err := c.doJSON(ctx, http.MethodPut, "/v1/sessions/"+esc(ses)+"/bindings", in, &out); err != nil {
		return nil, err
	}
	return out.Groups, nil
}

// Bindings lists the groups the session binds.
func (c *Client) Bindings(ctx context.Context, ses string) ([]*desk.Group, error) {
	var out desk.GroupList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/sessions/"+esc(ses)+"/bindings", nil, &out); err != nil {
		return nil, err
	}
	return out.Groups, nil
}

// Guest file system.

// GuestList lists a directory of the session's guest file system as an
// execution sees it; an empty path means "/".
func (c *Client) GuestList(ctx context.Context, ses, path string) ([]desk.GuestEntry, error) {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	var out desk.GuestList
	if err := c.doJSON(ctx, http.MethodGet, withQuery("/v1/sessions/"+esc(ses)+"/guest/list", q), nil, &out); err != nil {
		return nil, err
	}
	return out.Entries, nil
}

// GuestFile streams a file of the session's guest file system; the caller
// closes it.
func (c *Client) GuestFile(ctx context.Context, ses, path string) (io.ReadCloser, error) {
	q := url.Values{"path": {path}}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: withQuery("/v1/sessions/"+esc(ses)+"/guest/file", q), size: -1})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Administration.

// StoragePressure asks the server to reclaim unowned space at level "soft"
// or "critical" (admin token only). It never deletes an artifact.
func (c *Client) StoragePressure(ctx context.Context, level string) (*desk.ReclaimReport, error) {
	var rep desk.ReclaimReport
	if err := c.doJSON(ctx, http.MethodPost, "/v1/admin/storage-pressure", desk.PressureRequest{Level: level}, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// LoginLink asks the server for a fresh one-time login link for the web
// UI (admin token only).
func (c *Client) LoginLink(ctx context.Context) (*desk.LoginLink, error) {
	var l desk.LoginLink
	if err := c.doJSON(ctx, http.MethodPost, "/v1/admin/login-links", nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// RevokeBrowserSessions signs browsers out of the web UI: every browser
// session with the admin token, the caller's actor's own otherwise.
func (c *Client) RevokeBrowserSessions(ctx context.Context) (*desk.BrowserSessionsRevoked, error) {
	var r desk.BrowserSessionsRevoked
	if err := c.doJSON(ctx, http.MethodDelete, "/v1/browser-sessions", nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// nonNilBody makes a nil body an empty one, so uploads always carry a body.
func nonNilBody(r io.Reader) io.Reader {
	if r == nil {
		return http.NoBody
	}
	return r
}
