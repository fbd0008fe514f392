package httpapi

import (
	"net/http"
)

// param documents a query parameter.
type param struct {
	Name, Type, Doc string
	Required        bool
}

// route is one entry of the route table: how it is served and how it is
// documented. The router and the OpenAPI document are both built from this
// table, and a test sends a request to every documented operation.
type route struct {
	Method, Path string
	Public       bool
	Tag, Summary string
	Query        []param
	// Body is the request body: "" for none, "binary" for raw bytes, or the
	// name of a component schema.
	Body string
	// Resp is the success body: "" for none (204), "binary", or a schema
	// name. Status is the success status.
	Resp   string
	Status int
	handle func(*Server, http.ResponseWriter, *http.Request) error
}

// logQuery documents the filters of the app log routes.
var logQuery = []param{
	{Name: "level", Type: "string", Doc: "levels to include, repeated or comma separated (debug, info, warn, error)"},
	{Name: "min_level", Type: "string", Doc: "the lowest level to include"},
	{Name: "source", Type: "string", Doc: "sources to include, repeated or comma separated"},
	{Name: "q", Type: "string", Doc: "case-insensitive text to find in the message or fields"},
	{Name: "after_seq", Type: "integer", Doc: "entries after this seq, oldest first"},
	{Name: "before_seq", Type: "integer", Doc: "entries before this seq"},
	{Name: "session", Type: "string", Doc: "only entries of this session"},
	{Name: "workspace", Type: "string", Doc: "only entries of this workspace"},
	{Name: "limit", Type: "integer", Doc: "page size (default 200, at most 1000)"},
}

// routes is the whole route table: each area of the API keeps its own list.
func (s *Server) routes() []route {
	var all []route
	for _, part := range [][]route{
		systemRoutes(), workspaceRoutes(), sessionRoutes(), artifactRoutes(),
		groupRoutes(), guestRoutes(), archiveRoutes(), logRoutes(), adminRoutes(),
		executionRoutes(), agentRoutes(), filesRoutes(), transferRoutes(), uiRoutes(),
		lifecycleRoutes(), templateRoutes(), absorbRoutes(), usageRoutes(), runtimeRoutes(), profileRoutes(),
		threadRoutes(), routineRoutes(), aguiRoutes(), webhookRoutes(), inboxRoutes(),
	} {
		all = append(all, part...)
	}
	return all
}

func systemRoutes() []route {
	return []route{
		{Method: "GET", Path: "/healthz", Public: true, Tag: "system", Summary: "Liveness: answers without authentication once desk is serving.",
			Resp: "Health", Status: 200, handle: (*Server).health},
		{Method: "GET", Path: "/v1/openapi.json", Tag: "system", Summary: "This OpenAPI 3.1 document.",
			Resp: "OpenAPI", Status: 200, handle: (*Server).openapi},
	}
}

func workspaceRoutes() []route {
	return []route{
		{Method: "POST", Path: "/v1/workspaces", Tag: "workspaces", Summary: "Create a workspace (admin). It starts with a human actor named owner. A name that a workspace which is not purged has is 409 conflict unless allow_duplicate_name is true.",
			Body: "WorkspaceCreate", Resp: "Workspace", Status: 201, handle: (*Server).createWorkspace},
		{Method: "POST", Path: "/v1/workspace-manager", Tag: "workspaces", Summary: "Open the workspace manager (admin): the reserved workspace workspace-manager, made on first use, whose agent looks at the other workspaces read-only and asks them through dispatches (peer_list, peer_sessions, peer_path, peer_ask). It is listed apart from the users' workspaces and never offboarded, exported, absorbed or purged; make its sessions with POST /v1/workspaces/workspace-manager/sessions.",
			Resp: "Workspace", Status: 200, handle: (*Server).workspaceManager},
		{Method: "GET", Path: "/v1/workspaces", Tag: "workspaces", Summary: "List the workspaces the caller can see (not the workspace manager: POST /v1/workspace-manager).",
			Resp: "WorkspaceList", Status: 200, handle: (*Server).listWorkspaces},
		{Method: "GET", Path: "/v1/workspaces/{ws}", Tag: "workspaces", Summary: "Get a workspace.",
			Resp: "Workspace", Status: 200, handle: (*Server).getWorkspace},
		{Method: "POST", Path: "/v1/workspaces/{ws}/actors", Tag: "workspaces", Summary: "Create an actor and its token (admin). The token is shown only here.",
			Body: "ActorCreate", Resp: "ActorCreated", Status: 201, handle: (*Server).createActor},
		{Method: "GET", Path: "/v1/workspaces/{ws}/actors", Tag: "workspaces", Summary: "List actors (an actor token sees only itself).",
			Resp: "ActorList", Status: 200, handle: (*Server).listActors},
	}
}

func sessionRoutes() []route {
	return []route{
		{Method: "POST", Path: "/v1/workspaces/{ws}/sessions", Tag: "sessions", Summary: "Create a session bound to the workspace and an actor (an actor token: itself only).",
			Body: "SessionCreate", Resp: "Session", Status: 201, handle: (*Server).createSession},
		{Method: "GET", Path: "/v1/workspaces/{ws}/sessions", Tag: "sessions", Summary: "List sessions, most recently updated first.",
			Query: []param{{Name: "pinned", Type: "boolean", Doc: "only pinned (true) or unpinned (false) sessions"},
				{Name: "archived", Type: "boolean", Doc: "only archived (true) or active (false) sessions"}},
			Resp: "SessionList", Status: 200, handle: (*Server).listSessions},
		{Method: "GET", Path: "/v1/sessions/{ses}", Tag: "sessions", Summary: "Get a session.",
			Resp: "Session", Status: 200, handle: (*Server).getSession},
		{Method: "PATCH", Path: "/v1/sessions/{ses}", Tag: "sessions", Summary: "Rename, pin, archive or mark a session unread; bind it to a git worktree.",
			Body: "SessionPatch", Resp: "Session", Status: 200, handle: (*Server).patchSession},
		{Method: "DELETE", Path: "/v1/sessions/{ses}", Tag: "sessions", Summary: "Delete a session with its artifacts, bindings and scratch; selection groups stay.",
			Status: 204, handle: (*Server).deleteSession},
	}
}

func artifactRoutes() []route {
	return []route{
		{Method: "POST", Path: "/v1/sessions/{ses}/artifacts", Tag: "artifacts", Summary: "Store the body as a new artifact. Bytes decide the kind; misleading PNG/JPEG/PDF/XLSX/DOCX claims are refused.",
			Query: []param{{Name: "name", Type: "string", Required: true, Doc: "file name; sanitized, .md added when there is no extension"},
				{Name: "immutable", Type: "boolean", Doc: "store under /artifacts/immutable, refusing later updates"}},
			Body: "binary", Resp: "Artifact", Status: 201, handle: (*Server).createArtifact},
		{Method: "GET", Path: "/v1/sessions/{ses}/artifacts", Tag: "artifacts", Summary: "List the session's artifacts, oldest first.",
			Resp: "ArtifactList", Status: 200, handle: (*Server).listArtifacts},
		{Method: "GET", Path: "/v1/sessions/{ses}/artifacts/{art}", Tag: "artifacts", Summary: "Get an artifact's metadata.",
			Resp: "Artifact", Status: 200, handle: (*Server).getArtifact},
		{Method: "GET", Path: "/v1/sessions/{ses}/artifacts/{art}/content", Tag: "artifacts", Summary: "Download the bytes (Range, ETag and conditional requests supported).",
			Resp: "binary", Status: 200, handle: (*Server).artifactContent},
		{Method: "PUT", Path: "/v1/sessions/{ses}/artifacts/{art}/content", Tag: "artifacts", Summary: "Replace the bytes: same id, next revision; the previous revision is kept for one-step revert.",
			Body: "binary", Resp: "Artifact", Status: 200, handle: (*Server).updateArtifact},
		{Method: "POST", Path: "/v1/sessions/{ses}/artifacts/{art}/revert", Tag: "artifacts", Summary: "Restore the previous revision's bytes as a new revision (409 when there is none).",
			Resp: "Artifact", Status: 200, handle: (*Server).revertArtifact},
		{Method: "DELETE", Path: "/v1/sessions/{ses}/artifacts/{art}", Tag: "artifacts", Summary: "Delete an artifact: bytes, kept revision and row.",
			Status: 204, handle: (*Server).deleteArtifact},
	}
}

func groupRoutes() []route {
	return []route{
		{Method: "POST", Path: "/v1/workspaces/{ws}/groups", Tag: "groups", Summary: "Create a selection group (ambient context owned by the workspace).",
			Body: "GroupCreate", Resp: "Group", Status: 201, handle: (*Server).createGroup},
		{Method: "GET", Path: "/v1/workspaces/{ws}/groups", Tag: "groups", Summary: "List the workspace's selection groups.",
			Resp: "GroupList", Status: 200, handle: (*Server).listGroups},
		{Method: "GET", Path: "/v1/groups/{grp}", Tag: "groups", Summary: "Get a group with its items.",
			Resp: "GroupWithItems", Status: 200, handle: (*Server).getGroup},
		{Method: "DELETE", Path: "/v1/groups/{grp}", Tag: "groups", Summary: "Delete a group; its bindings go, items nothing else holds are collected.",
			Status: 204, handle: (*Server).deleteGroup},
		{Method: "POST", Path: "/v1/groups/{grp}/items", Tag: "groups", Summary: "Add an item: a JSON body with text or url, or raw bytes with ?name=.",
			Query: []param{{Name: "name", Type: "string", Doc: "file name for a raw-bytes item"}},
			Body:  "ItemCreate", Resp: "Item", Status: 201, handle: (*Server).addItem},
		{Method: "DELETE", Path: "/v1/groups/{grp}/items/{item}", Tag: "groups", Summary: "Remove an item from the group; it is collected at once when nothing holds it.",
			Status: 204, handle: (*Server).removeItem},
		{Method: "PUT", Path: "/v1/sessions/{ses}/bindings", Tag: "groups", Summary: "Replace the groups a session binds.",
			Body: "BindingsPut", Resp: "GroupList", Status: 200, handle: (*Server).putBindings},
		{Method: "GET", Path: "/v1/sessions/{ses}/bindings", Tag: "groups", Summary: "List the groups a session binds.",
			Resp: "GroupList", Status: 200, handle: (*Server).getBindings},
	}
}

func guestRoutes() []route {
	return []route{
		{Method: "GET", Path: "/v1/sessions/{ses}/guest/list", Tag: "guest", Summary: "List a directory of the session's guest file system, as an execution sees it.",
			Query: []param{{Name: "path", Type: "string", Doc: "guest path, default /"}},
			Resp:  "GuestList", Status: 200, handle: (*Server).guestList},
		{Method: "GET", Path: "/v1/sessions/{ses}/guest/file", Tag: "guest", Summary: "Read a file of the session's guest file system; denied paths answer 403.",
			Query: []param{{Name: "path", Type: "string", Required: true, Doc: "guest path of a file"}},
			Resp:  "binary", Status: 200, handle: (*Server).guestFile},
	}
}

func archiveRoutes() []route {
	return []route{
		{Method: "GET", Path: "/v1/workspaces/{ws}/archive", Tag: "archive", Summary: "Stream the workspace's append-only archive as NDJSON, records exactly as stored, in order (admin).",
			Query: []param{{Name: "channel", Type: "string", Doc: "only this channel"},
				{Name: "conversation", Type: "string", Doc: "only this conversation id"},
				{Name: "from", Type: "string", Doc: "records at or after this time (RFC 3339 or YYYY-MM-DD)"},
				{Name: "to", Type: "string", Doc: "records before this time (RFC 3339 or YYYY-MM-DD)"}},
			Resp: "NDJSON", Status: 200, handle: (*Server).readArchive},
		{Method: "GET", Path: "/v1/workspaces/{ws}/archive/days", Tag: "archive", Summary: "List the days that have archive files, and the files (of one day with ?day=).",
			Query: []param{{Name: "day", Type: "string", Doc: "YYYY-MM-DD: list only that day's files"}},
			Resp:  "ArchiveDays", Status: 200, handle: (*Server).archiveDays},
	}
}

func logRoutes() []route {
	return []route{
		{Method: "GET", Path: "/v1/logs", Tag: "logs", Summary: "Read the app log (admin): redacted entries, oldest first within the page.",
			Query: logQuery, Resp: "LogList", Status: 200, handle: (*Server).listLogs},
		{Method: "GET", Path: "/v1/logs/stream", Tag: "logs", Summary: "Tail the app log as server-sent events; the event id is the entry's seq (Last-Event-ID resumes).",
			Query: logQuery, Resp: "EventStream", Status: 200, handle: (*Server).streamLogs},
		{Method: "GET", Path: "/v1/logs/unread", Tag: "logs", Summary: "Unread warn and error counts against the caller's seen mark (info and debug never count).",
			Resp: "LogUnread", Status: 200, handle: (*Server).logsUnread},
		{Method: "POST", Path: "/v1/logs/seen", Tag: "logs", Summary: "Move the caller's seen mark forward to seq (it never moves back).",
			Body: "LogSeen", Resp: "LogUnread", Status: 200, handle: (*Server).logsSeen},
	}
}

func adminRoutes() []route {
	return []route{
		{Method: "POST", Path: "/v1/admin/storage-pressure", Tag: "admin", Summary: "Reclaim unowned space (scratch, abandoned temporary files, unreachable items). Never deletes an artifact.",
			Body: "PressureRequest", Resp: "ReclaimReport", Status: 200, handle: (*Server).storagePressure},
		{Method: "POST", Path: "/v1/admin/login-links", Tag: "admin", Summary: "Issue a one-time login link for the web UI (admin): visiting it before it expires signs a browser in as the admin, once. Only the code's hash is kept, in the database, so any node of that database exchanges the link.",
			Resp: "LoginLink", Status: 201, handle: (*Server).createLoginLink},
		{Method: "DELETE", Path: "/v1/browser-sessions", Tag: "admin", Summary: "Sign browsers out of the web UI: end every browser session (admin token) or every one of the caller's actor (actor token), at once and in every browser that holds one.",
			Resp: "BrowserSessionsRevoked", Status: 200, handle: (*Server).revokeBrowserSessions},
	}
}
