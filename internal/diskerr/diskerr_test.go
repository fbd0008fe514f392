package diskerr

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/desk-runtime/desk"
)

func TestWrap(t *testing.T) {
	t.Parallel()
	full := &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}
	coded := desk.Errorf(desk.EFORBIDDEN, "no")
	other := errors.New("boom")
	for _, c := range []struct {
		name      string
		got       error
		code, msg string
	}{
		{"full", Wrap("store", full), desk.ENOSPACE, "store: the disk is full"},
		{"quota", Discarded("write /a", fmt.Errorf("x: %w", syscall.EDQUOT)), desk.ENOSPACE, "write /a: the disk is full; nothing was kept"},
		{"coded", Discarded("write /a", coded), desk.EFORBIDDEN, "no"},
		{"other", Wrap("list", other), desk.EINTERNAL, "internal error"},
	} {
		if code := desk.ErrorCode(c.got); code != c.code {
			t.Errorf("%s: code %q, want %q", c.name, code, c.code)
		}
		if msg := desk.ErrorMessage(c.got); msg != c.msg {
			t.Errorf("%s: message %q, want %q", c.name, msg, c.msg)
		}
	}
	if got := Wrap("list", other); !errors.Is(got, other) || got.Error() != "list: boom" {
		t.Errorf("other: %v does not wrap the cause under the operation's name", got)
	}
	if got := Wrap("x", coded); got != error(coded) {
		t.Errorf("coded: %v, want the coded error itself", got)
	}
}
