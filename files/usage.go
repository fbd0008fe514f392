package files

import (
	"context"
	"errors"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/diskerr"
	"github.com/desk-runtime/desk/internal/keyedmutex"
	"github.com/desk-runtime/desk/layout"
)

// Usage accounting. An actor's usage is the bytes and count of the regular
// files in its area, desk's temporary files excluded. The store keeps a
// running total per actor: file API uploads and deletes add to it in the
// same operation (an upload reserves its bytes before it becomes visible
// and gives them back if it fails), and every walk of the whole area (stats
// and GC) replaces it with what it measured. The artifact API (and the
// agent's file tools, which use it) admit their writes through Admit, so
// the quota holds for them too; files an agent's commands write are
// counted at the next walk.

// Quota bounds each actor's file area and keeps its running usage total.
// It is a part of its own, built before the artifact service and the file
// service, because both admit writes through it: the file service its
// uploads, the artifact service (and the agent's file tools, which use it)
// every artifact it keeps. With the quota inside the file service, which
// itself writes artifacts through the artifact service, the two needed
// each other.
type Quota struct {
	store  Store
	home   layout.Home
	opts   Options
	actors keyedmutex.Map // one quota decision per actor at a time
}

// NewQuota returns the quota of opts.QuotaBytes (0: unlimited, but the
// usage totals are still kept).
func NewQuota(store Store, home layout.Home, opts Options) *Quota {
	return &Quota{store: store, home: home, opts: opts}
}

// openArea opens the actor's area (see Service.openArea).
func (q *Quota) openArea(a *area, create bool) (*os.Root, error) {
	return openArea(q.home, a, create)
}

func (q *Quota) quotaErr(a *area, limit int64) error {
	return desk.Errorf(desk.ETOOLARGE, "the upload would exceed the file quota of actor %s (%d bytes; %d bytes left for this file)", a.actor.ID, q.opts.QuotaBytes, max(limit, 0))
}

// room is how many more bytes the actor may store, or -1 without a quota.
func (q *Quota) room(ctx context.Context, a *area) (int64, error) {
	if q.opts.QuotaBytes <= 0 {
		return -1, nil
	}
	u, err := q.usage(ctx, a)
	if err != nil {
		return 0, err
	}
	return max(q.opts.QuotaBytes-u.Bytes, 0), nil
}

// usage returns the running total, measuring the area first if it never
// was. The per-actor lock keeps two first uploads from walking twice.
func (q *Quota) usage(ctx context.Context, a *area) (*desk.ActorUsage, error) {
	u, err := q.store.GetActorUsage(ctx, a.actor.ID)
	if err == nil {
		return u, nil
	}
	if !desk.IsCode(err, desk.ENOTFOUND) {
		return nil, err
	}
	unlock := q.actors.Lock(a.actor.ID)
	defer unlock()
	return q.usageLocked(ctx, a)
}

func (q *Quota) usageLocked(ctx context.Context, a *area) (*desk.ActorUsage, error) {
	u, err := q.store.GetActorUsage(ctx, a.actor.ID)
	if err == nil {
		return u, nil
	}
	if !desk.IsCode(err, desk.ENOTFOUND) {
		return nil, err
	}
	st, err := q.measure(ctx, a)
	if err != nil {
		return nil, err
	}
	return &desk.ActorUsage{WorkspaceID: a.ws.ID, ActorID: a.actor.ID, Bytes: st.Bytes, Files: st.Files}, nil
}

// admit returns the Admit step of an upload: with a quota, the new total
// must fit (a file that shrinks is always admitted); the change is then
// added to the running total at once, so concurrent uploads see each
// other's reservations, and undo gives it back.
func (q *Quota) admit(ctx context.Context, a *area) func(replaced, size int64) (func(), error) {
	return func(replaced, size int64) (func(), error) {
		dBytes, dFiles := size-max(replaced, 0), int64(0)
		if replaced < 0 {
			dFiles = 1
		}
		if q.opts.QuotaBytes > 0 {
			unlock := q.actors.Lock(a.actor.ID)
			defer unlock()
			u, err := q.usageLocked(ctx, a)
			if err != nil {
				return nil, err
			}
			if dBytes > 0 && u.Bytes+dBytes > q.opts.QuotaBytes {
				return nil, q.quotaErr(a, q.opts.QuotaBytes-u.Bytes+max(replaced, 0))
			}
		}
		if err := q.store.AddActorUsage(ctx, a.actor.ID, dBytes, dFiles); err != nil {
			return nil, err
		}
		return func() {
			_ = q.store.AddActorUsage(context.WithoutCancel(ctx), a.actor.ID, -dBytes, -dFiles)
		}, nil
	}
}

// Admit is the quota check of a write that does not come through the file
// API: the artifact service calls it with the size of the bytes it is about
// to keep (replaced is the size of the file they replace, or -1 for a new
// file) and, if it then fails to keep them, calls undo.
func (q *Quota) Admit(ctx context.Context, workspaceID, actorID string, replaced, size int64) (undo func(), err error) {
	w, err := q.store.GetWorkspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	act, err := q.store.GetActor(ctx, actorID)
	if err != nil {
		return nil, err
	}
	return q.admit(ctx, &area{ws: w, actor: act, admin: true})(replaced, size)
}

// measure walks the whole area and stores what it found as the running
// total.
func (q *Quota) measure(ctx context.Context, a *area) (*desk.FileStats, error) {
	st := &desk.FileStats{WorkspaceID: a.ws.ID, ActorID: a.actor.ID, Folders: []desk.FolderUsage{}}
	root, err := q.openArea(a, false)
	if err != nil && !errors.Is(err, errNoArea) {
		return nil, err
	}
	if err == nil {
		defer root.Close()
		folders := map[string]*desk.FolderUsage{}
		err = walk(root, ".", 0, func(n node) (bool, error) {
			if hidden(path.Base(n.rel)) || isLink(n.info) {
				return false, nil
			}
			top, _, nested := strings.Cut(n.rel, "/")
			key := "/"
			if nested || n.info.IsDir() {
				key = "/" + top
			}
			fu := folders[key]
			if fu == nil {
				fu = &desk.FolderUsage{Path: key}
				folders[key] = fu
			}
			switch {
			case n.info.IsDir():
				st.Dirs++
				return true, nil
			case n.info.Mode().IsRegular():
				st.Files++
				st.Bytes += n.info.Size()
				fu.Files++
				fu.Bytes += n.info.Size()
			}
			return false, nil
		}, nil)
		if err != nil {
			return nil, diskerr.Discarded("measure the file area", err)
		}
		for _, fu := range folders {
			st.Folders = append(st.Folders, *fu)
		}
		slices.SortFunc(st.Folders, func(x, y desk.FolderUsage) int { return strings.Compare(x.Path, y.Path) })
	}
	err = q.store.SetActorUsage(ctx, &desk.ActorUsage{WorkspaceID: a.ws.ID, ActorID: a.actor.ID, Bytes: st.Bytes, Files: st.Files, UpdatedAt: desk.Now()})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Stats measures the actor's area: files, folders, bytes, artifacts, totals
// per top-level folder, and the quota. Measuring also corrects the running
// usage total.
func (s *Service) Stats(ctx context.Context, scope desk.FileScope) (*desk.FileStats, error) {
	a, err := s.area(ctx, scope)
	if err != nil {
		return nil, err
	}
	unlock := s.quota.actors.Lock(a.actor.ID)
	st, err := s.quota.measure(ctx, a)
	unlock()
	if err != nil {
		return nil, err
	}
	xs, err := s.store.ListSessions(ctx, desk.SessionFilter{WorkspaceID: a.ws.ID, ActorID: a.actor.ID})
	if err != nil {
		return nil, err
	}
	for _, x := range xs {
		n, err := s.store.CountArtifacts(ctx, x.ID)
		if err != nil {
			return nil, err
		}
		st.Artifacts += int64(n)
	}
	st.QuotaBytes, st.UsedBytes = s.opts.QuotaBytes, st.Bytes
	if s.opts.QuotaBytes > 0 {
		st.AvailableBytes = max(s.opts.QuotaBytes-st.Bytes, 0)
	}
	return st, nil
}

// GC collects what nothing owns in the workspace (see gc.Collector.Workspace)
// and then measures every actor's area, so the usage totals are exact
// after it.
func (s *Service) GC(ctx context.Context, workspaceID string) (*desk.GCReport, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok || !p.Admin {
		return nil, desk.Errorf(desk.EFORBIDDEN, "only the admin token may run a workspace's GC")
	}
	if !desk.HasPrefix(workspaceID, desk.PrefixWorkspace) {
		return nil, desk.Errorf(desk.ENOTFOUND, "workspace %q not found", workspaceID)
	}
	w, err := s.workspaces.GetWorkspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	rep, err := s.collector.Workspace(ctx, w.ID, s.artifacts)
	if err != nil {
		return nil, err
	}
	actors, err := s.store.ListActors(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	for _, act := range actors {
		a := &area{ws: w, actor: act, admin: true}
		unlock := s.quota.actors.Lock(act.ID)
		_, err := s.quota.measure(ctx, a)
		unlock()
		if err != nil {
			return nil, err
		}
	}
	return rep, nil
}
