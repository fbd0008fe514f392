package files

import (
	"io"

	"github.com/desk-runtime/desk/atomicfile"
)

// SetFill replaces how uploads write their bytes, for tests that need a
// full disk, and returns the function that restores it.
func SetFill(fn func(f *atomicfile.File, body io.Reader, size int64) (int64, error)) (restore func()) {
	old := fill
	fill = fn
	return func() { fill = old }
}
