package applog_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any goroutine outlives them: every
// component closes what it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A test's own HTTP client may keep a connection it did not read to
		// the end; that is the test's, not desk's.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}
