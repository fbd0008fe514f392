//go:build !linux

package transfer

import (
	"io/fs"
	"os"
)

// syncTree makes an unpacked tree durable before its rows are committed,
// one file at a time where the platform has no syncfs.
func syncTree(root *os.Root) error {
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() && !d.IsDir() {
			return nil
		}
		f, err := root.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}
