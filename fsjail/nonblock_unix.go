//go:build unix

package fsjail

import "syscall"

// oNonblock keeps open(2) of a FIFO from waiting for a writer. It has no
// effect on regular files, which are the only files Open hands out.
const oNonblock = syscall.O_NONBLOCK
