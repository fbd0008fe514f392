// Package diskerr turns a failed disk operation into the error a door
// reports: a full disk is the client's insufficient_storage (507), anything
// else a machine failure that names what was being done.
package diskerr

import (
	"errors"
	"fmt"

	"github.com/desk-runtime/desk"
)

// Wrap names the failed operation what. A full disk (desk.NoSpace) becomes
// desk.ENOSPACE "what: the disk is full"; an error that already carries a
// desk code passes through unchanged; anything else is wrapped.
func Wrap(what string, err error) error {
	return wrap(what, "", err)
}

// Discarded is Wrap for an operation whose partial result the caller has
// thrown away: a full disk's message also says that nothing was kept.
func Discarded(what string, err error) error {
	return wrap(what, "; nothing was kept", err)
}

func wrap(what, outcome string, err error) error {
	if desk.NoSpace(err) {
		return desk.Errorf(desk.ENOSPACE, "%s: the disk is full%s", what, outcome)
	}
	var de *desk.Error
	if errors.As(err, &de) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}
