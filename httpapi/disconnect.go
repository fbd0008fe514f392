package httpapi

import (
	"net/http"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/httpdoor"
)

// logFailure logs a request's internal failure as an error, or, when the
// client went away, as the debug line it is.
func (s *Server) logFailure(r *http.Request, msg string, err error, args ...any) {
	args = append(args, desk.LogErr, err)
	if httpdoor.ClientGone(r, err) {
		s.Logger.Debug(msg+": the client went away", args...)
		return
	}
	s.Logger.Error(msg, args...)
}
