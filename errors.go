package desk

import (
	"errors"
	"fmt"
	"syscall"
)

// Error codes. They are part of the HTTP contract ({"error":{"code","message"}})
// and of the Go client, so the CLI sees the same codes the server produced.
const (
	EINVALID      = "invalid"              // the request is malformed or names something impossible
	EUNAUTHORIZED = "unauthorized"         // no or unknown credentials
	EFORBIDDEN    = "forbidden"            // credentials are known but may not do this
	ENOTFOUND     = "not_found"            // no such thing, or the caller may not know it exists
	ECONFLICT     = "conflict"             // the request contradicts the current state
	ETOOLARGE     = "too_large"            // a body or a quota limit was exceeded
	EBUSY         = "busy"                 // the target is occupied; retry later
	EBLOCKED      = "blocked"              // running work prevents the operation; the message lists it
	ESTALEPLAN    = "stale_plan"           // a plan's digest no longer matches what applying it would do
	EUNAVAILABLE  = "unavailable"          // a dependency is down or the target is gone for good
	EINTERNAL     = "internal"             // a failure of the machine, not of the request
	ENOSPACE      = "insufficient_storage" // the disk is full; the change was not kept
	ETIMEOUT      = "request_timeout"      // the request body did not arrive in time
)

// Error is desk's one error type for failures a caller should see. Anything
// that is not an *Error is reported as internal, with its text kept out of
// the response so that machine details never leak to clients.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// ENOSPACE for a full disk (see NoSpace), or EINTERNAL for any other error,
// or "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if NoSpace(err) {
		return ENOSPACE
	}
	return EINTERNAL
}

// ErrorMessage returns the message of the first *Error in err's chain, or a
// generic text for a full disk and for internal errors.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	if NoSpace(err) {
		return "the disk is full; the change was not kept"
	}
	return "internal error"
}

// BodyCode is the code of a failure to read a request body: ETIMEOUT
// when the body's deadline cut it off, EINVALID when the client broke off.
func BodyCode(err error) string {
	if IsCode(err, ETIMEOUT) {
		return ETIMEOUT
	}
	return EINVALID
}

// NoSpace reports whether err says the disk (or the user's quota on it) is
// full: ENOSPC or EDQUOT anywhere in its chain. This is the one place a
// full disk becomes ENOSPACE (507), whichever write met it: a file write
// returns the errno itself, and the store adapters wrap their database's
// own "disk full" (SQLITE_FULL, Postgres 53100) around ENOSPC so that it
// lands here too.
func NoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// IsCode reports whether err carries the given code.
func IsCode(err error, code string) bool { return ErrorCode(err) == code }

// SwappedError is the EFORBIDDEN error of a declared host path whose
// directory was replaced after its declaration (a link or another
// directory in its place). The file jail returns it; the doors log it
// (Guest and Why), while callers see only Err's message, which does not
// describe the host.
type SwappedError struct {
	Guest string // the mount's guest path
	// Why says what was found instead, for the log only.
	Why string
	Err *Error
}

func (e *SwappedError) Error() string { return e.Err.Error() }
func (e *SwappedError) Unwrap() error { return e.Err }
