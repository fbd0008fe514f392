package agent

import "github.com/desk-runtime/desk"

// The agent serves the doors' context view through the root's interface,
// so the doors need not link this package; the rest of a conversation's
// records are the conversation service's (desk.ConversationService).
var _ desk.AgentService = (*Agent)(nil)
