package httpapi

import (
	"mime"
	"net/http"

	"github.com/desk-runtime/desk"
)

func (s *Server) createGroup(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	var in struct {
		desk.GroupCreate
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	g, err := s.Selection.CreateGroup(r.Context(), ws, in.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, g)
	return nil
}

func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	gs, err := s.Selection.ListGroups(r.Context(), ws)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.GroupList{Groups: nonNil(gs)})
	return nil
}

func (s *Server) getGroup(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "grp", desk.PrefixGroup)
	if err != nil {
		return err
	}
	g, items, err := s.Selection.GetGroup(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.GroupWithItems{Group: g, Items: nonNil(items)})
	return nil
}

func (s *Server) deleteGroup(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "grp", desk.PrefixGroup)
	if err != nil {
		return err
	}
	if err := s.Selection.DeleteGroup(r.Context(), id); err != nil {
		return err
	}
	return noContent(w)
}

// addItem takes a JSON body with text or url, or any other content type as
// the raw bytes of a file item.
func (s *Server) addItem(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "grp", desk.PrefixGroup)
	if err != nil {
		return err
	}
	var in desk.ItemCreate
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		var body struct {
			desk.ItemCreateRequest
			ignoredOrigin
		}
		if err := decode(w, r, &body); err != nil {
			return err
		}
		in = desk.ItemCreate{Text: body.Text, URL: body.URL, Title: body.Title, Name: body.Name}
	} else {
		in = desk.ItemCreate{Name: r.URL.Query().Get("name"), Body: r.Body, MediaType: mediaHint(r)}
	}
	it, err := s.Selection.AddItem(r.Context(), id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, it)
	return nil
}

func (s *Server) removeItem(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "grp", desk.PrefixGroup)
	if err != nil {
		return err
	}
	item, err := pathID(r, "item", desk.PrefixItem)
	if err != nil {
		return err
	}
	if err := s.Selection.RemoveItem(r.Context(), id, item); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) putBindings(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	var in struct {
		desk.BindingsPut
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	gs, err := s.Sessions.SetBindings(r.Context(), ses, in.GroupIDs)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.GroupList{Groups: nonNil(gs)})
	return nil
}

func (s *Server) getBindings(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	gs, err := s.Sessions.Bindings(r.Context(), ses)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.GroupList{Groups: nonNil(gs)})
	return nil
}

func (s *Server) guestList(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		p = "/"
	}
	ents, err := s.Sessions.GuestList(r.Context(), ses, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.GuestList{Path: p, Entries: nonNil(ents)})
	return nil
}

func (s *Server) guestFile(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		return desk.Errorf(desk.EINVALID, "query parameter path is required")
	}
	f, e, err := s.Sessions.GuestOpen(r.Context(), ses, p)
	if err != nil {
		return err
	}
	defer f.Close()
	w.Header().Set("Content-Type", guestMediaType(e.Name, f, e.Size))
	safeBytes(w.Header())
	http.ServeContent(w, r, e.Name, e.Modified, f)
	return nil
}
