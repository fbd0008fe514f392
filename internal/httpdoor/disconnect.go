// Package httpdoor holds the HTTP plumbing desk's two HTTP doors (the API
// in httpapi and the web UI in web) share: the one mapping of error codes
// to statuses, telling a departed client from a failure, and the
// rate-limited log of refused credentials. It knows no service.
package httpdoor

import (
	"context"
	"errors"
	"io"
	"net/http"
	"syscall"
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
