//go:build !unix

package transfer

import "io/fs"

// identity reports no hard links where the platform does not expose inodes;
// every name is then exported as a file of its own.
func identity(fs.FileInfo) (fileID, bool) { return fileID{}, false }
