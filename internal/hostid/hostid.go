// Package hostid names the process space a desk process runs in, so that
// an owner row's pid is judged alive or dead only by a process that can
// see that pid: the same machine, boot and PID namespace.
package hostid

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
)

// Identity is hostname/boot id/PID namespace. Two containers share a
// hostname and a boot but not their pids: without the namespace one
// judged the other's live desk dead (its pid absent here) and interrupted
// its running turns. Where the namespace cannot be read the identity is
// unique to this process, so no other process's pid is ever judged by it
// and heartbeats alone decide.
var Identity = sync.OnceValue(func() string {
	h, err := os.Hostname()
	if err != nil {
		h = "unknown-host"
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || ns == "" {
		var b [8]byte
		rand.Read(b[:])
		ns = "unknown-" + hex.EncodeToString(b[:])
	}
	return h + "/" + strings.TrimSpace(string(boot)) + "/" + ns
})

// PIDAlive reports whether a process of this identity's namespace has pid.
func PIDAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
