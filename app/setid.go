package app

import (
	"log/slog"
	"time"

	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/sandbox"
)

// sweepSetid clears, before anything runs, the setuid and setgid bits of
// every regular file in DESK_HOME: the workspaces a sandbox writes
// (checkouts, worktrees, artifacts, scratch), departed workspaces and the
// runtimes' state. A run that died with desk (kill -9, a crash, a power
// cut) never had its post-run strip, and such a file belongs to desk's
// uid: any host user who can run it would become desk. The seccomp filter
// keeps sandboxes from making one; this covers files from before it. The
// whole home is swept, not a list of its directories, so a directory
// added later is covered too; nothing in it is setuid on purpose. Declared
// host paths outside DESK_HOME are not swept (the operator's own
// directories; the post-run strip covers what a run did there). A sweep
// that fails is logged, not fatal.
func sweepSetid(log *slog.Logger, home layout.Home) {
	s, err := sandbox.SweepSetid(home.Root)
	attrs := []any{"entries", s.Entries, "cleared", s.Cleared, "took", s.Elapsed.Round(time.Millisecond)}
	if s.Skipped > 0 {
		attrs = append(attrs, "unreadable_directories", s.Skipped)
	}
	switch {
	case err != nil:
		log.Warn("setuid/setgid sweep of DESK_HOME", append(attrs, "err", err)...)
	case s.Cleared > 0:
		log.Warn("setuid/setgid sweep of DESK_HOME cleared files left by an earlier run", append(attrs, "paths", s.Paths)...)
	default:
		log.Info("setuid/setgid sweep of DESK_HOME", attrs...)
	}
}
