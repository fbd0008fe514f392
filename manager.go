package desk

// ManagerWorkspaceID is the reserved id of the workspace manager
// (OpenAlice's workspace-manager): the launcher-level coordination desk.
// It is made on demand, listed apart from the users' workspaces, never
// offboarded, exported, absorbed or purged, and its agent has the peer
// tools (peer_list, peer_sessions, peer_path, peer_ask) that look at the
// other workspaces read-only and ask them through dispatches; it writes
// nothing outside its own workspace.
const ManagerWorkspaceID = "workspace-manager"

// ManagerName is the workspace manager's display name.
const ManagerName = "Workspace Manager"

// RefuseManager is the error of an operation the workspace manager never
// undergoes (what: "offboarded", "exported", …), or nil for another
// workspace.
func RefuseManager(ws, what string) error {
	if ws != ManagerWorkspaceID {
		return nil
	}
	return Errorf(EINVALID, "%s is desk's reserved coordination workspace: it is never %s", ManagerWorkspaceID, what)
}
