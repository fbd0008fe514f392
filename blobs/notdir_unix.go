//go:build unix

package blobs

import "syscall"

// notDirErr is what opening "a/b" gives when "a" is a file: for a key
// store that is simply "no such object".
var notDirErr error = syscall.ENOTDIR
