// Package leaktest owns desk's one rule for goroutine leak checks in tests:
// every component closes what it started, so a goroutine that outlives a
// package's tests (or a test's desks) is a defect. The only goroutines it
// forgives are a test's own HTTP client connections, which belong to the
// test, not to desk.
package leaktest

import (
	"testing"

	"go.uber.org/goleak"
)

// Options are the goleak options every check uses, plus extra.
func Options(extra ...goleak.Option) []goleak.Option {
	return append([]goleak.Option{
		// A test's own HTTP client may keep a connection it did not read to
		// the end; that is the test's, not desk's.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	}, extra...)
}

// Main runs a package's tests and fails them when any goroutine outlives
// them; call it from TestMain.
func Main(m *testing.M) { goleak.VerifyTestMain(m, Options()...) }
