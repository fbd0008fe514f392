//go:build unix

package transfer

import (
	"io/fs"
	"syscall"
)

// identity returns the file's device and inode when it has more than one
// name, so an export can write its later names as hard links.
func identity(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, true
}
