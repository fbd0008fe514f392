package web

import (
	"net/http"
	"path"
	"strings"

	"github.com/desk-runtime/desk"
)

// filesView is the browser of one folder of an actor's file area.
type filesView struct {
	WS      *desk.Workspace
	Actor   string // as asked (id or name); empty: the caller's own, or the owner
	ActorID string
	Actors  []*desk.Actor
	Path    string
	Crumbs  []crumb
	Entries []desk.FileEntry
	Stats   *desk.FileStats
	// UsedPercent fills the usage bar: of the quota when there is one, of
	// the whole area's biggest folder otherwise.
	Folders []folderBar
	Max     int64
}

type crumb struct{ Name, Path string }

type folderBar struct {
	desk.FolderUsage
}

// cleanDir normalizes a folder path of the area: leading slash, no
// trailing one (except the root).
func cleanDir(p string) string {
	p = path.Clean("/" + strings.TrimSpace(p))
	return p
}

func (s *Server) filesView(r *request) (*filesView, error) {
	ws, err := s.workspaceOf(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	v := &filesView{WS: ws, Actor: q.Get("actor"), Path: cleanDir(q.Get("path"))}
	scope := desk.FileScope{WorkspaceID: ws.ID, Actor: v.Actor}
	if r.p.Admin {
		if v.Actors, err = s.d.Workspaces.ListActors(r.Context(), ws.ID); err != nil {
			return nil, err
		}
	}
	listing, err := s.d.Files.List(r.Context(), scope, desk.FileListOptions{Path: v.Path, Depth: 1}, func(e desk.FileEntry) error {
		if e.Path != v.Path {
			v.Entries = append(v.Entries, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	v.ActorID = listing.ActorID
	if v.Stats, err = s.d.Files.Stats(r.Context(), scope); err != nil {
		return nil, err
	}
	for _, f := range v.Stats.Folders {
		v.Folders = append(v.Folders, folderBar{f})
		if f.Bytes > v.Max {
			v.Max = f.Bytes
		}
	}
	acc := ""
	for _, seg := range strings.Split(strings.Trim(v.Path, "/"), "/") {
		if seg == "" {
			continue
		}
		acc += "/" + seg
		v.Crumbs = append(v.Crumbs, crumb{Name: seg, Path: acc})
	}
	return v, nil
}

func (s *Server) filesPage(w http.ResponseWriter, r *request) error {
	v, err := s.filesView(r)
	if err != nil {
		return err
	}
	if isHTMX(r.Request) {
		return s.render(w, "files-main", v)
	}
	l, err := s.page(r, v.WS, "files", "Files · "+v.WS.Name, "files-main", v)
	if err != nil {
		return err
	}
	return s.render(w, "layout", l)
}

func fileScope(r *request) desk.FileScope {
	return desk.FileScope{WorkspaceID: r.PathValue("ws"), Actor: r.URL.Query().Get("actor")}
}

func (s *Server) fileRaw(w http.ResponseWriter, r *request) error {
	if _, err := s.workspaceOf(r); err != nil {
		return err
	}
	f, e, err := s.d.Files.Open(r.Context(), fileScope(r), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	defer f.Close()
	serveBytes(w, r.Request, path.Base(e.Path), e.Kind, "application/octet-stream", e.SHA256, e.Modified, f, true)
	return nil
}

// fileUpload stores the body at ?path= and answers the refreshed folder.
func (s *Server) fileUpload(w http.ResponseWriter, r *request) error {
	if _, err := s.workspaceOf(r); err != nil {
		return err
	}
	p := r.URL.Query().Get("path")
	if strings.TrimSpace(p) == "" {
		return desk.Errorf(desk.EINVALID, "an upload needs ?path=")
	}
	size := r.ContentLength
	if size < 0 {
		size = -1
	}
	if _, err := s.d.Files.Upload(r.Context(), fileScope(r), desk.FilePut{Path: p, Body: r.Body, Size: size,
		MediaType: r.Header.Get("Content-Type")}); err != nil {
		return err
	}
	return s.refreshFiles(w, r, path.Dir(cleanDir(p)))
}

func (s *Server) fileDelete(w http.ResponseWriter, r *request) error {
	if _, err := s.workspaceOf(r); err != nil {
		return err
	}
	p := r.URL.Query().Get("path")
	if _, err := s.d.Files.Delete(r.Context(), fileScope(r), p, func(desk.FileEntry) error { return nil }); err != nil {
		return err
	}
	return s.refreshFiles(w, r, path.Dir(cleanDir(p)))
}

func (s *Server) fileDeletePrefix(w http.ResponseWriter, r *request) error {
	if _, err := s.workspaceOf(r); err != nil {
		return err
	}
	prefix := r.FormValue("prefix")
	if _, err := s.d.Files.DeleteByPrefix(r.Context(), fileScope(r), prefix, func(desk.FileEntry) error { return nil }); err != nil {
		return err
	}
	return s.refreshFiles(w, r, path.Dir(cleanDir(prefix)))
}

// refreshFiles answers the listing of dir after a change.
func (s *Server) refreshFiles(w http.ResponseWriter, r *request, dir string) error {
	q := r.URL.Query()
	q.Del("prefix")
	q.Set("path", dir)
	r.URL.RawQuery = q.Encode()
	v, err := s.filesView(r)
	if err != nil {
		return err
	}
	return s.render(w, "files-main", v)
}
