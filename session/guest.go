package session

import (
	"context"
	"os"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/layout"
)

// View describes what one guest file system shows: the session, the groups
// it binds, and the scratch directory of the running execution, if any.
type View struct {
	Session   *desk.Session
	GroupIDs  []string
	Execution string // empty outside an execution: no /scratch
}

// Mounts returns the guest mounts of a view (DESIGN "What an agent sees").
// /artifacts/immutable is read-only to executions; /context is read-only to
// everyone.
func Mounts(home layout.Home, v View) []fsjail.Mount {
	x := v.Session
	ws := x.WorkspaceID
	m := []fsjail.Mount{
		{Guest: "/artifacts", Host: home.Abs(ws, layout.SessionRel(x.Actor, x.ID)), ReadOnlyDirs: []string{ImmutableDir}},
		{Guest: "/workspace", Host: home.Abs(ws, layout.CheckoutDir)},
	}
	for _, g := range v.GroupIDs {
		m = append(m, fsjail.Mount{Guest: "/context/" + g, Host: home.Abs(ws, layout.GroupRel(g)), ReadOnly: true})
	}
	if v.Execution != "" {
		m = append(m, fsjail.Mount{Guest: "/scratch", Host: home.Abs(ws, layout.ScratchRel(v.Execution))})
	}
	return m
}

func (s *sessions) jail(ctx context.Context, sessionID string) (*fsjail.Jail, error) {
	x, err := visibleSession(ctx, s.store, sessionID)
	if err != nil {
		return nil, err
	}
	groups, err := s.store.ListBindings(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	v := View{Session: x}
	for _, g := range groups {
		v.GroupIDs = append(v.GroupIDs, g.ID)
	}
	return fsjail.New(Mounts(s.home, v))
}

func entry(e fsjail.Entry) desk.GuestEntry { return desk.GuestEntry(e) }

// GuestList lists a guest directory as an execution of the session would
// see it, without desk's own temporary files.
func (s *sessions) GuestList(ctx context.Context, sessionID, guestPath string) ([]desk.GuestEntry, error) {
	j, err := s.jail(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	ents, err := j.ReadDir(guestPath)
	if err != nil {
		return nil, err
	}
	out := make([]desk.GuestEntry, 0, len(ents))
	for _, e := range ents {
		if atomicfile.IsTemp(e.Name) {
			continue
		}
		out = append(out, entry(e))
	}
	return out, nil
}

// GuestOpen opens a guest file for reading.
func (s *sessions) GuestOpen(ctx context.Context, sessionID, guestPath string) (*os.File, desk.GuestEntry, error) {
	j, err := s.jail(ctx, sessionID)
	if err != nil {
		return nil, desk.GuestEntry{}, err
	}
	defer j.Close()
	st, err := j.Stat(guestPath)
	if err != nil {
		return nil, desk.GuestEntry{}, err
	}
	f, err := j.Open(guestPath)
	if err != nil {
		return nil, desk.GuestEntry{}, err
	}
	return f, entry(st), nil
}
