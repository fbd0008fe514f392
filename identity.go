package desk

// The variables naming the session a command or a runtime child runs for.
const (
	EnvSessionID   = "DESK_SESSION_ID"
	EnvSignature   = "DESK_SIGNATURE"
	EnvWorkspaceID = "DESK_WORKSPACE_ID"
	EnvThreadID    = "DESK_THREAD_ID"
)

// Identity is who an agent is working as: its session, that session's
// readable signature, its workspace, and the handler thread when the turn
// runs on one. desk's commands and the runtime children it starts get it
// as environment variables (and desk's own agent in its system prompt), so
// a program the agent runs (a CLI of desk, a script that labels its
// output) can say which session it works for — OpenAlice's "every live
// agent receives its resume id and signature". It names; it grants
// nothing: every origin is stamped by the server from the running
// execution, so a process that changes or forges these variables changes
// only its own environment.
type Identity struct {
	SessionID, Signature, WorkspaceID string
	// ThreadID is set on a handler thread: its thr_ id (the agent sets
	// it from the thread row); IdentityOf alone, which has no thread,
	// names the handler surface.
	ThreadID string
}

// IdentityOf is the identity of a turn of session x on surface (empty or
// the session's own surface: no thread).
func IdentityOf(x *Session, surface string) Identity {
	id := Identity{SessionID: x.ID, Signature: x.Signature, WorkspaceID: x.WorkspaceID}
	if surface != "" && surface != x.SurfaceID {
		id.ThreadID = surface
	}
	return id
}

// Vars are the identity's environment variables (DESK_THREAD_ID only on
// a thread).
func (id Identity) Vars() map[string]string {
	v := map[string]string{EnvSessionID: id.SessionID, EnvSignature: id.Signature, EnvWorkspaceID: id.WorkspaceID}
	if id.ThreadID != "" {
		v[EnvThreadID] = id.ThreadID
	}
	return v
}
