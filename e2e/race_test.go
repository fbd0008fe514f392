//go:build race

package e2e

// raceEnabled: the desk binary under test is built with the race detector
// too, as the test binary itself was.
const raceEnabled = true
