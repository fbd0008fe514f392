package desk

// Keys of the structured log attributes every desk component uses, defined
// once so that one filter finds an event whoever logged it: the app log
// lifts LogComponent, LogWorkspaceID and LogSessionID into the entry's
// columns (GET /v1/logs?workspace=…&session=… filters on them), and an
// operator grepping the server's output finds "workspace_id=ws_…" on every
// line about that workspace. A line about two workspaces (absorb) names the
// one it changes LogWorkspaceID and the other LogSourceWorkspaceID.
const (
	LogComponent         = "component"
	LogWorkspaceID       = "workspace_id"
	LogSourceWorkspaceID = "source_workspace_id"
	LogSessionID         = "session_id"
	LogExecutionID       = "execution_id"
	LogCommandID         = "command_id"
	LogQueueItemID       = "queue_item_id"
	LogItemID            = "item_id"
	LogJournalID         = "journal_id"
	LogTemplate          = "template"
	LogMethod            = "method"
	LogPath              = "path"
	LogRemote            = "remote"
	LogCount             = "count"
	LogErr               = "err"
	LogRollbackErr       = "rollback_err"
)
