//go:build unix

package fsjail

import (
	"io/fs"
	"syscall"
)

// IdentityOf returns the device and inode of a file; ok is false where the
// file system does not say.
func IdentityOf(fi fs.FileInfo) (FileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileID{}, false
	}
	return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, true
}
