//go:build !linux

package sandbox

import (
	"context"

	"github.com/desk-runtime/desk"
)

// Bubblewrap returns the sandboxed Runner. bubblewrap exists on Linux
// only: elsewhere every Run answers *Denied.
func Bubblewrap(bwrapPath string) Runner { return unsupported{} }

// Detect returns the bubblewrap Runner on Linux; elsewhere an EUNAVAILABLE
// error.
func Detect() (Runner, error) {
	return nil, desk.Errorf(desk.EUNAVAILABLE, "the command sandbox (bubblewrap) exists on Linux only: run desk on Linux to let agents run commands, "+
		"or choose the full-access approval mode for a workspace to run its commands on the host without a sandbox")
}

type unsupported struct{}

func (unsupported) Run(ctx context.Context, s Spec, onOutput OutputFunc) (*Result, error) {
	if _, err := prepare(s, false); err != nil {
		return nil, err
	}
	return nil, &Denied{Reason: "the command sandbox (bubblewrap) exists on Linux only"}
}

// cgroup exists on Linux only.
type cgroup struct{}

func cgroupBoundsMemory(*cgroup) bool { return false }

// Warm does nothing where there is no sandbox.
func Warm() {}
