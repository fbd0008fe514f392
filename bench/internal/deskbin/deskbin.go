// Package deskbin gives the benchmarks that drive the real desk binary
// the binary and a free loopback address: DESK_BENCH_BIN when set (to
// measure another build the same way, side by side), else this tree's,
// built once per benchmark process into a temporary directory.
package deskbin

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	bin  string
)

// Path returns the desk binary under test, failing tb when it cannot be
// built.
func Path(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("DESK_BENCH_BIN"); p != "" {
		return p
	}
	once.Do(func() {
		dir, err := os.MkdirTemp("", "desk-bench-bin-")
		if err != nil {
			return
		}
		p := filepath.Join(dir, "desk")
		cmd := exec.Command("go", "build", "-o", p, "github.com/desk-runtime/desk/cmd/desk")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if cmd.Run() == nil {
			bin = p
		}
	})
	if bin == "" {
		tb.Fatal("building desk failed")
	}
	return bin
}

// FreeAddr returns a loopback host:port nothing listens on now.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
