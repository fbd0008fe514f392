package selection

import (
	"context"

	"github.com/desk-runtime/desk"
)

// Store is the part of Store the selection service calls; Store
// documents each method's contract. The application passes its whole
// store, which satisfies every package's narrower one.
type Store interface {
	ItemStore
	CreateGroup(ctx context.Context, g *desk.Group) error
	GetGroup(ctx context.Context, id string) (*desk.Group, error)
	ListGroups(ctx context.Context, workspaceID string) ([]*desk.Group, error)
	DeleteGroup(ctx context.Context, id string) error
	AddItem(ctx context.Context, groupID string, it *desk.Item) error
	GetItem(ctx context.Context, id string) (*desk.Item, error)
	ListGroupItems(ctx context.Context, groupID string) ([]*desk.Item, error)
	RemoveGroupItem(ctx context.Context, groupID, itemID string) error
}

// ItemStore is what Collect needs: deleting an item row once nothing holds
// it. The collector (package gc) calls Collect with its own store.
type ItemStore interface {
	DeleteItemIfUnreachable(ctx context.Context, id string) (bool, error)
}
