//go:build unix

package fsjail

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// A FIFO planted in a writable mount must not hang a reader: Open refuses it
// without waiting for a writer, Stat refuses to describe it and ReadDir
// leaves it out.
func TestSpecialFilesAreRefused(t *testing.T) {
	tr := newTestTree(t)
	fifo := filepath.Join(tr.dir, "home", "ses_A", "artifacts", "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := tr.jail.Open("/artifacts/pipe")
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		wantCode(t, "Open fifo", err, desk.EINVALID)
	case <-time.After(5 * time.Second):
		t.Fatal("Open of a FIFO blocked")
	}
	_, err := tr.jail.Stat("/artifacts/pipe")
	wantCode(t, "Stat fifo", err, desk.EINVALID)
	es, err := tr.jail.ReadDir("/artifacts")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Name == "pipe" {
			t.Errorf("ReadDir described the FIFO: %+v", e)
		}
	}
}
