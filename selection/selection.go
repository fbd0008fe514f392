// Package selection owns ambient selection groups and their web items
// (PawWork §6): groups belong to the workspace, never to a session; items
// are materialized as files so the guest sees them under /context/<group>;
// an item lives while a group references it and is collected as soon as
// nothing does. It never touches a session's artifacts.
package selection

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/classify"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/session"
	"github.com/desk-runtime/desk/workspace"
)

// Service is the selection service.
type Service struct {
	store      Store
	home       layout.Home
	workspaces desk.WorkspaceService
}

var _ desk.SelectionService = (*Service)(nil)

// New returns the selection service.
func New(store Store, home layout.Home, workspaces desk.WorkspaceService) *Service {
	return &Service{store: store, home: home, workspaces: workspaces}
}

// group returns the group if the caller may see its workspace.
func (s *Service) group(ctx context.Context, id string) (*desk.Group, error) {
	g, err := s.store.GetGroup(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.workspaces.GetWorkspace(ctx, g.WorkspaceID); err != nil {
		return nil, desk.Errorf(desk.ENOTFOUND, "group %s not found", id)
	}
	return g, nil
}

func origin(ctx context.Context, ws string) desk.Origin {
	p, _ := desk.PrincipalFrom(ctx)
	o := desk.Origin{WorkspaceID: ws, Actor: p.ActorID, Kind: desk.OriginUser}
	if p.Admin {
		o.Actor = desk.AdminActor
	}
	return o
}

func (s *Service) CreateGroup(ctx context.Context, workspaceID, name string) (*desk.Group, error) {
	if _, err := s.workspaces.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	if err := workspace.ValidName("group name", name); err != nil {
		return nil, err
	}
	now := desk.Now()
	g := &desk.Group{ID: desk.NewID(desk.PrefixGroup), WorkspaceID: workspaceID, Name: strings.TrimSpace(name),
		Origin: origin(ctx, workspaceID), CreatedAt: now, UpdatedAt: now}
	if err := os.MkdirAll(s.home.Abs(workspaceID, layout.GroupRel(g.ID)), 0o755); err != nil {
		return nil, fmt.Errorf("create group directory: %w", err)
	}
	if err := s.store.CreateGroup(ctx, g); err != nil {
		return nil, err
	}
	return g, nil
}

func (s *Service) GetGroup(ctx context.Context, id string) (*desk.Group, []*desk.Item, error) {
	g, err := s.group(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	items, err := s.store.ListGroupItems(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return g, items, nil
}

func (s *Service) ListGroups(ctx context.Context, workspaceID string) ([]*desk.Group, error) {
	if _, err := s.workspaces.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	return s.store.ListGroups(ctx, workspaceID)
}

func (s *Service) DeleteGroup(ctx context.Context, id string) error {
	g, err := s.group(ctx, id)
	if err != nil {
		return err
	}
	items, err := s.store.ListGroupItems(ctx, id)
	if err != nil {
		return err
	}
	if err := s.store.DeleteGroup(ctx, id); err != nil {
		return err
	}
	if err := os.RemoveAll(s.home.Abs(g.WorkspaceID, layout.GroupRel(id))); err != nil {
		return fmt.Errorf("delete group directory: %w", err)
	}
	for _, it := range items {
		if _, err := Collect(ctx, s.store, s.home, it); err != nil {
			return err
		}
	}
	return nil
}

// linkName is the item's file name inside its group's directory.
func linkName(it *desk.Item) string { return it.ID + "-" + it.Name }

func (s *Service) AddItem(ctx context.Context, groupID string, in desk.ItemCreate) (*desk.Item, error) {
	g, err := s.group(ctx, groupID)
	if err != nil {
		return nil, err
	}
	it := &desk.Item{ID: desk.NewID(desk.PrefixItem), WorkspaceID: g.WorkspaceID, Origin: origin(ctx, g.WorkspaceID), CreatedAt: desk.Now()}
	var body io.Reader
	n := 0
	if in.Text != nil {
		n++
		it.Kind, body = desk.ItemText, strings.NewReader(*in.Text)
		it.Name = orDefault(in.Name, "note.txt")
	}
	if in.URL != "" {
		n++
		u, err := url.Parse(in.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, desk.Errorf(desk.EINVALID, "url %q must be an absolute http or https URL", in.URL)
		}
		it.Kind, it.URL, it.Title = desk.ItemURL, u.String(), in.Title
		it.Name = orDefault(in.Name, u.Hostname()+".url")
		// The standard Internet-shortcut format, readable by people and tools.
		body = strings.NewReader("[InternetShortcut]\nURL=" + it.URL + "\n")
	}
	if in.Body != nil {
		n++
		it.Kind, body = desk.ItemFile, in.Body
		it.Name = orDefault(in.Name, "file.bin")
	}
	if n != 1 {
		return nil, desk.Errorf(desk.EINVALID, "an item needs exactly one of text, url or a file body")
	}
	if it.Name, err = session.SanitizeName(it.Name); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(s.home.Workspace(g.WorkspaceID))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := atomicfile.Create(root, layout.ItemRel(it.ID))
	if err != nil {
		return nil, err
	}
	defer f.Abort()
	h := sha256.New()
	size, err := f.Fill(body, h)
	if err != nil {
		return nil, desk.Errorf(desk.BodyCode(err), "item upload interrupted: %v", err)
	}
	class, err := classify.Classify(it.Name, in.MediaType, f.File, size)
	if err != nil {
		return nil, err
	}
	if err := classify.Check(it.Name, in.MediaType, class); err != nil {
		return nil, err
	}
	it.Size, it.SHA256, it.MediaType = size, hex.EncodeToString(h.Sum(nil)), class.MediaType
	if err := f.Commit(); err != nil {
		return nil, err
	}
	// The group's view links the bytes before the row exists, so an item
	// that is listed is always readable under /context; a crash in between
	// leaves a link with no row that collection removes.
	link := path.Join(layout.GroupRel(g.ID), linkName(it))
	if err := root.MkdirAll(layout.GroupRel(g.ID), 0o755); err != nil {
		return nil, err
	}
	if err := root.Link(layout.ItemRel(it.ID), link); err != nil {
		_ = root.Remove(layout.ItemRel(it.ID))
		return nil, err
	}
	if err := s.store.AddItem(ctx, g.ID, it); err != nil {
		_ = root.Remove(link)
		_ = root.Remove(layout.ItemRel(it.ID))
		return nil, err
	}
	return it, nil
}

func orDefault(s, d string) string {
	if strings.TrimSpace(s) == "" {
		return d
	}
	return s
}

func (s *Service) RemoveItem(ctx context.Context, groupID, itemID string) error {
	g, err := s.group(ctx, groupID)
	if err != nil {
		return err
	}
	it, err := s.store.GetItem(ctx, itemID)
	if err != nil {
		return err
	}
	if err := s.store.RemoveGroupItem(ctx, groupID, itemID); err != nil {
		return err
	}
	if err := os.Remove(s.home.Abs(g.WorkspaceID, path.Join(layout.GroupRel(groupID), linkName(it)))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	_, err = Collect(ctx, s.store, s.home, it)
	return err
}

// Collect deletes the item if nothing holds it any more, reporting the bytes
// freed (0 when it is still reachable).
func Collect(ctx context.Context, store ItemStore, home layout.Home, it *desk.Item) (int64, error) {
	ok, err := store.DeleteItemIfUnreachable(ctx, it.ID)
	if err != nil || !ok {
		return 0, err
	}
	if err := os.Remove(home.Abs(it.WorkspaceID, layout.ItemRel(it.ID))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	return it.Size, nil
}
