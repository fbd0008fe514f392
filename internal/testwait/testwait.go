// Package testwait is the one polling helper of desk's tests: wait until a
// condition holds, or fail the test naming what never happened. Tests use
// it where no event announces the condition (another process's state seen
// through its API or its files), instead of fixed sleeps. Never is the
// other half: a thing that must not happen is watched for, for as long as
// it would take to happen, and the test fails the moment it does.
package testwait

import (
	"testing"
	"time"
)

// Interval is how often Until checks its condition: short enough that a
// test waits little past the moment the condition holds, long enough that
// polling another process's API does not load the machine.
const Interval = 20 * time.Millisecond

// Until calls cond until it returns true and fails the test (t.Fatalf) if
// it has not within timeout. what names the awaited condition in the
// failure ("execution exe_1 to settle").
func Until(t testing.TB, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Poll calls cond until it returns true or timeout passes, and reports
// whether it did; for callers that fail in their own words (a dump of
// state, a subtest's own t).
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for !cond() {
		if !time.Now().Before(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// Never checks cond throughout window and fails the test (t.Fatalf) the
// moment it returns true. It is for what must not happen (a row run twice
// after a restart): no event announces that nothing happened, so the test
// watches for as long as the thing would take to happen. what names it
// ("the command to run again").
func Never(t testing.TB, window time.Duration, cond func() bool, what string) {
	t.Helper()
	if Poll(window, cond) {
		t.Fatalf("%s, which must not happen", what)
	}
}
