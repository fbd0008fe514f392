package agent

import "github.com/desk-runtime/desk"

// The agent serves the doors' view of a conversation (transcripts, the
// context view and the decisions a turn waits for) through the root's
// interface, so the doors need not link this package.
var _ desk.AgentService = (*Agent)(nil)
