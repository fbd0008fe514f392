package runtimehost

import (
	"context"
	"sort"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/conversation"
)

// A runtime's turn is written into the session's transcript as desk's own
// agent writes its turns: the user's message when the turn starts, and one
// assistant message with the reply and the runtime's tool calls when it
// ends (also an interrupted or failed one, with what it did so far). The
// transcript API attaches each call's command record to that message, so
// the runtime's commands show as spans like the agent's, and a reload
// shows what the live view showed.

// userMessage appends the turn's user message.
func (s *sink) userMessage(ctx context.Context) error {
	t := s.t
	m := &desk.Message{ID: desk.NewID("msg"), SessionID: t.Session.ID, SurfaceID: t.Execution.SurfaceID, ExecutionID: t.Execution.ID,
		Role: desk.RoleUser, Text: t.Item.Text, CreatedAt: desk.Now()}
	return s.h.o.Store.AppendMessage(ctx, m)
}

// assistantMessage appends the turn's assistant message: the final reply
// when the turn ended (s.reply), else the text streamed so far, and every
// tool call the runtime reported, in the order they started.
func (s *sink) assistantMessage() {
	text := s.reply
	if text == "" {
		text = s.text.String()
	}
	cmds := make([]*desk.Command, 0, len(s.cmds))
	for _, c := range s.cmds {
		cmds = append(cmds, c)
	}
	if text == "" && len(cmds) == 0 {
		return
	}
	sort.Slice(cmds, func(i, j int) bool {
		if !cmds[i].CreatedAt.Equal(cmds[j].CreatedAt) {
			return cmds[i].CreatedAt.Before(cmds[j].CreatedAt)
		}
		return cmds[i].ID < cmds[j].ID
	})
	calls := make([]desk.MessageCall, 0, len(cmds))
	for _, c := range cmds {
		calls = append(calls, desk.MessageCall{ID: c.CallID, Name: c.Tool, Arguments: c.Arguments})
	}
	t := s.t
	m := &desk.Message{ID: desk.NewID("msg"), SessionID: t.Session.ID, SurfaceID: t.Execution.SurfaceID, ExecutionID: t.Execution.ID,
		Role: desk.RoleAssistant, Text: text, ToolCalls: calls, CreatedAt: desk.Now()}
	if s.stopped && text != "" {
		conversation.MarkInterrupted(s.t.WriteContext(), s.h.o.Store, m, t.Execution.ID)
	}
	if err := s.h.o.Store.AppendMessage(s.t.WriteContext(), m); err != nil {
		s.log().Warn("record the runtime's reply in the transcript", "err", err)
	}
}
