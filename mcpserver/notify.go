package mcpserver

import (
	"context"
	"log/slog"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Progress reports a tool call's progress to the client that asked for it
// (sent a progress token); for a call without one it does nothing. The
// reported value never goes backwards, as the spec requires.
type Progress struct {
	ss    *sdk.ServerSession
	token any
	mu    sync.Mutex
	last  float64
	sent  bool
}

// NewProgress returns the progress reporter of a tool call.
func NewProgress(req *sdk.CallToolRequest) *Progress {
	return &Progress{ss: req.Session, token: req.Params.GetProgressToken()}
}

// Report sends progress done of total (0: unknown) with a message.
func (p *Progress) Report(ctx context.Context, msg string, done, total float64) {
	if p.token == nil || p.ss == nil {
		return
	}
	p.mu.Lock()
	if p.sent && done < p.last {
		done = p.last
	}
	p.last, p.sent = done, true
	p.mu.Unlock()
	_ = p.ss.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: p.token, Progress: done, Total: total, Message: msg})
}

// Step reports one more step of a call whose total is unknown.
func (p *Progress) Step(ctx context.Context, msg string) {
	p.mu.Lock()
	next := p.last + 1
	p.mu.Unlock()
	p.Report(ctx, msg, next, 0)
}

// SessionLogger returns a logger whose records go to the MCP client as
// notifications/message, at or above the level the client set with
// logging/setLevel (nothing before it set one).
func SessionLogger(ss *sdk.ServerSession) *slog.Logger {
	return slog.New(sdk.NewLoggingHandler(ss, &sdk.LoggingHandlerOptions{LoggerName: "desk"}))
}
