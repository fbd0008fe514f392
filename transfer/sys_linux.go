//go:build linux

package transfer

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncTree makes an unpacked tree durable before its rows are committed.
// One syncfs flushes the whole file system: an export of a hundred thousand
// files would otherwise cost a hundred thousand fsyncs.
func syncTree(root *os.Root) error {
	d, err := root.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}
