//go:build !linux

package files

import "os"

// startWriteback has no early-writeback hint to give on this platform; the
// final fsync does all the work.
func startWriteback(*os.File) *writeback { return nil }
