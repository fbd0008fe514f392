//go:build !unix

package ownerlock

import "os"

// Name is the lock file in an owned directory.
const Name = "owner.lock"

// Hold does nothing where flock does not exist.
func Hold(string) (*os.File, error) { return nil, nil }

// Sweep removes nothing where flock does not exist.
func Sweep(string, string, string) int { return 0 }
