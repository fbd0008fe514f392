//go:build unix

package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// lockName is the file in a process's socket directory that the process
// holds an exclusive flock on for as long as it runs. A directory whose
// lock can be taken belongs to a process that ended without Close (kill
// -9, a crash): its sockets serve nobody and it is removed. A lock works
// across PID namespaces and hosts sharing the home, where a PID would
// not tell a live peer from a dead one.
const lockName = "owner.lock"

// hold makes and locks dir's owner lock; the returned file keeps the lock
// until closed (or the process ends).
func hold(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sweep removes the socket directories under base that no live process
// holds, and returns how many it removed. Only desk-gw-* directories are
// looked at; a directory without a lock file (made by a desk from before
// the lock, or being made this instant by a peer) is left alone.
func sweep(base, own string) int {
	es, err := os.ReadDir(base)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range es {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "desk-gw-") {
			continue
		}
		d := filepath.Join(base, e.Name())
		if d == own {
			continue
		}
		f, err := os.OpenFile(filepath.Join(d, lockName), os.O_RDWR|syscall.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			// Held now by this process: nobody else owns it, and a peer
			// that opens it next finds it gone or fails to lock it.
			if os.RemoveAll(d) == nil {
				n++
			}
		}
		f.Close()
	}
	return n
}
