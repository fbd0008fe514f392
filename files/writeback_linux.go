//go:build linux

package files

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback starts writing an upload's bytes to disk while the rest is
// still arriving, so the final fsync finds little left to do and the disk
// works in parallel with the network instead of after it. The hints go
// through their own goroutine: sync_file_range can block while the device
// queue is full, and the receiving loop must never wait for it (measured
// with a 1 GiB upload on loopback: inline hints made uploads slower, hints
// from a goroutine cut the final fsync from ~600 ms to under 100 ms).
func startWriteback(f *os.File) *writeback {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	w := &writeback{kick: make(chan int64, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var synced int64
		for upto := range w.kick {
			if upto <= synced {
				continue
			}
			_ = rc.Control(func(fd uintptr) {
				// SYNC_FILE_RANGE_WRITE only starts writeback of the
				// range's dirty pages; durability still comes from the
				// fsync before the rename.
				_ = unix.SyncFileRange(int(fd), synced, upto-synced, unix.SYNC_FILE_RANGE_WRITE)
			})
			synced = upto
		}
	}()
	return w
}
