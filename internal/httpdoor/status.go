package httpdoor

import (
	"net/http"

	"github.com/desk-runtime/desk"
)

// StatusOf maps an error code to its HTTP status. It is the only place that
// knows the mapping; the Go client maps statuses back through the code in
// the body, not the status.
func StatusOf(code string) int {
	switch code {
	case desk.EINVALID:
		return http.StatusBadRequest
	case desk.EUNAUTHORIZED:
		return http.StatusUnauthorized
	case desk.EFORBIDDEN:
		return http.StatusForbidden
	case desk.ENOTFOUND:
		return http.StatusNotFound
	case desk.ECONFLICT, desk.EBUSY, desk.EBLOCKED, desk.ESTALEPLAN:
		return http.StatusConflict
	case desk.ETOOLARGE:
		return http.StatusRequestEntityTooLarge
	case desk.EUNAVAILABLE:
		return http.StatusServiceUnavailable
	case desk.ENOSPACE:
		return http.StatusInsufficientStorage
	case desk.ETIMEOUT:
		return http.StatusRequestTimeout
	default:
		return http.StatusInternalServerError
	}
}
