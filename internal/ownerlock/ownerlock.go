//go:build unix

// Package ownerlock marks a directory as a live process's own: the
// process holds an exclusive flock on a file in it for as long as it uses
// the directory, and a sweep removes the directories whose lock anyone can
// take (their process was killed before it cleaned up). Unlike a pid in
// the name, a lock tells a dead owner from a live one in another PID
// namespace (containers sharing /tmp or a home) and is never confused by
// a reused pid.
package ownerlock

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Name is the lock file in an owned directory.
const Name = "owner.lock"

// Hold marks dir as this process's: the returned file holds the lock
// until it is closed or the process ends. The lock is taken on a file of
// another name and only then renamed to Name, so a sweep never sees an
// owned directory's lock file unlocked.
func Hold(dir string) (*os.File, error) {
	var b [8]byte
	rand.Read(b[:])
	tmp := filepath.Join(dir, ".owner-"+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, Name)); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return f, nil
}

// Sweep removes the directories directly under base whose names start
// with prefix, other than own, that have a lock file no process holds, and
// returns how many it removed. A directory without a lock file (being made
// this instant, or made before locks) is left alone.
func Sweep(base, prefix, own string) int {
	es, err := os.ReadDir(base)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range es {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		d := filepath.Join(base, e.Name())
		if d == own {
			continue
		}
		f, err := os.OpenFile(filepath.Join(d, Name), os.O_RDWR|syscall.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		// Taken: nobody holds it, and while this process holds it no
		// other sweep removes the directory at the same time.
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			if os.RemoveAll(d) == nil {
				n++
			}
		}
		f.Close()
	}
	return n
}
