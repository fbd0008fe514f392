package providertest

import (
	"net/http"
	"strings"
	"testing"
)

// CheckErrorBodies is the shared case of every adapter: of an error body
// only the JSON error type and message reach the error, redacted; an
// HTML body adds nothing but the status. The error becomes an
// execution's reason, which the session's actor reads. call sends one
// request with key to srv and returns its error.
func CheckErrorBodies(t *testing.T, key string, call func(srv *Server) error) {
	t.Helper()
	secrets := []string{key, "sk-live-ABCDEF0123456789abcdef", "secret123", "debug", "internal-host-17", "<html"}
	for _, tc := range []struct {
		name, ctype, body string
		want              []string
	}{
		{"json", "application/json", `{"type":"error","error":{"type":"invalid_request_error","message":"bad key sk-live-ABCDEF0123456789abcdef in header, yours: ` + key + `"},"debug":"Authorization: Bearer secret123 internal-host-17"}`,
			[]string{"HTTP 400", "invalid_request_error: bad key [redacted] in header"}},
		{"html", "text/html", `<html><body>proxy at internal-host-17: Authorization: Bearer secret123 sk-live-ABCDEF0123456789abcdef</body></html>`,
			[]string{"HTTP 400"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := NewServer(t, Exchange{Status: 400, Header: http.Header{"Content-Type": {tc.ctype}}, Body: []byte(tc.body)})
			err := call(srv)
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q lacks %q", err, s)
				}
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("%q holds %q", err, s)
				}
			}
		})
	}
}
