package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"syscall"

	"github.com/desk-runtime/desk"
)

// ClientGone reports whether a request failed because its client went
// away — it cancelled the request, closed the connection while desk wrote
// the answer, or stopped sending a body it announced — rather than because
// of desk. Such a failure is the client's choice: it is logged at debug
// level, never as an error the operator's unread badge counts.
func ClientGone(r *http.Request, err error) bool {
	if err == nil {
		return false
	}
	if r.Context().Err() != nil || errors.Is(err, context.Canceled) {
		return true
	}
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF)
}

// logFailure logs a request's internal failure as an error, or, when the
// client went away, as the debug line it is.
func (s *Server) logFailure(r *http.Request, msg string, err error, args ...any) {
	args = append(args, desk.LogErr, err)
	if ClientGone(r, err) {
		s.Logger.Debug(msg+": the client went away", args...)
		return
	}
	s.Logger.Error(msg, args...)
}
