package sandbox

import "time"

// SetidSweep is what a sweep of setuid and setgid bits did.
type SetidSweep struct {
	Entries int64         // directory entries looked at
	Cleared int64         // regular files whose bits were cleared
	Paths   []string      // the first of them (at most maxSweepPaths), for the log
	Skipped int64         // directories that could not be read, or lay too deep
	Elapsed time.Duration // the sweep's wall time
}
