package transfer

import (
	"context"

	"github.com/desk-runtime/desk"
)

// Store is the part of Store the transfer service calls; Store
// documents each method's contract; the application passes its whole store.
type Store interface {
	desk.TransferStore
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
}
