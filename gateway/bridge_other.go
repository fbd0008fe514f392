//go:build !linux

package gateway

import "os/exec"

// setDeathSignal: only Linux has PDEATHSIG (and the sandbox).
func setDeathSignal(*exec.Cmd) {}
