package web

import (
	"net/http"
	"strings"

	"github.com/desk-runtime/desk"
)

type catalogView struct {
	Available bool
	Entries   []*desk.CatalogEntry
	// Suffix holds the id suffix of each entry whose name another entry
	// shares (idSuffixes).
	Suffix map[string]string
}

func (s *Server) catalogView(r *request) (*catalogView, error) {
	v := &catalogView{Available: s.d.Catalog != nil}
	if !v.Available {
		return v, nil
	}
	var err error
	if v.Entries, err = s.d.Catalog.Catalog(r.Context()); err != nil {
		return nil, err
	}
	v.Suffix = catalogSuffixes(v.Entries)
	return v, nil
}

func (s *Server) catalogPage(w http.ResponseWriter, r *request) error {
	if !r.p.Admin {
		return desk.Errorf(desk.EFORBIDDEN, "only the admin token may see the workspace catalog")
	}
	v, err := s.catalogView(r)
	if err != nil {
		return err
	}
	if isHTMX(r.Request) {
		return s.render(w, "catalog-main", v)
	}
	l, err := s.page(r, nil, "catalog", "Catalog", "catalog-main", v)
	if err != nil {
		return err
	}
	return s.render(w, "layout", l)
}

// catalogAction runs offboard, restore or purge and answers the refreshed
// catalog.
func (s *Server) catalogAction(w http.ResponseWriter, r *request) error {
	if !r.p.Admin {
		return desk.Errorf(desk.EFORBIDDEN, "only the admin token may change a workspace's lifecycle")
	}
	if s.d.Catalog == nil {
		return desk.Errorf(desk.EUNAVAILABLE, "this desk has no workspace lifecycle")
	}
	ws := r.PathValue("ws")
	if !desk.HasPrefix(ws, desk.PrefixWorkspace) {
		return desk.Errorf(desk.ENOTFOUND, "workspace %q not found", ws)
	}
	var err error
	switch r.PathValue("action") {
	case "offboard":
		_, err = s.d.Catalog.Offboard(r.Context(), ws, desk.OffboardInput{Reason: strings.TrimSpace(r.Header.Get("HX-Prompt"))})
	case "restore":
		_, err = s.d.Catalog.Restore(r.Context(), ws)
	case "purge":
		_, err = s.d.Catalog.Purge(r.Context(), ws, strings.TrimSpace(r.Header.Get("HX-Prompt")))
	default:
		err = desk.Errorf(desk.EINVALID, "catalog action %q must be offboard, restore or purge", r.PathValue("action"))
	}
	if err != nil {
		return err
	}
	v, err := s.catalogView(r)
	if err != nil {
		return err
	}
	return s.render(w, "catalog-main", v)
}
