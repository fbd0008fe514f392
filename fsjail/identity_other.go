//go:build !unix

package fsjail

import "io/fs"

// IdentityOf returns ok false: this platform does not expose inodes, so
// pinned mounts cannot be opened on it.
func IdentityOf(fs.FileInfo) (FileID, bool) { return FileID{}, false }
