package httpapi

import (
	"mime"
	"net/http"
	"strings"

	"github.com/desk-runtime/desk"
)

func sessionArtifact(r *http.Request) (string, string, error) {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return "", "", err
	}
	art, err := pathID(r, "art", desk.PrefixArtifact)
	return ses, art, err
}

// mediaHint is the request's Content-Type as a classification hint; the
// generic types that say nothing about the bytes are dropped.
func mediaHint(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt == "application/octet-stream" || mt == "application/x-www-form-urlencoded" {
		return ""
	}
	return ct
}

func (s *Server) createArtifact(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if q.Get("name") == "" {
		return desk.Errorf(desk.EINVALID, "query parameter name is required")
	}
	imm, err := boolParam(r, "immutable")
	if err != nil {
		return err
	}
	a, err := s.Artifacts.Create(r.Context(), ses, desk.ArtifactPut{
		Name: q.Get("name"), Immutable: imm != nil && *imm, MediaType: mediaHint(r), Body: r.Body, Size: r.ContentLength,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, a)
	return nil
}

func (s *Server) listArtifacts(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	as, err := s.Artifacts.List(r.Context(), ses)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.ArtifactList{Artifacts: nonNil(as)})
	return nil
}

func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request) error {
	ses, art, err := sessionArtifact(r)
	if err != nil {
		return err
	}
	a, err := s.Artifacts.Get(r.Context(), ses, art)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

// artifactContent serves the bytes. ServeContent does Range, If-Match,
// If-None-Match and If-Modified-Since from the ETag (the SHA-256) and the
// update time, and hands the file to sendfile when it can.
func (s *Server) artifactContent(w http.ResponseWriter, r *http.Request) error {
	ses, art, err := sessionArtifact(r)
	if err != nil {
		return err
	}
	a, f, err := s.Artifacts.Open(r.Context(), ses, art)
	if err != nil {
		return err
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", a.MediaType)
	h.Set("ETag", fmtETag(a.SHA256))
	h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": a.Name}))
	safeBytes(h)
	http.ServeContent(w, r, a.Name, a.UpdatedAt, f)
	return nil
}

// safeBytes keeps stored bytes inert when a browser opens them directly:
// no MIME sniffing, and an HTML artifact runs in an opaque origin that cannot
// read desk's cookies or call its API.
func safeBytes(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("Cache-Control", "private, no-cache")
}

func (s *Server) updateArtifact(w http.ResponseWriter, r *http.Request) error {
	ses, art, err := sessionArtifact(r)
	if err != nil {
		return err
	}
	if im := r.Header.Get("If-Match"); im != "" {
		cur, err := s.Artifacts.Get(r.Context(), ses, art)
		if err != nil {
			return err
		}
		if strings.TrimSpace(im) != "*" && strings.TrimSpace(im) != fmtETag(cur.SHA256) {
			return desk.Errorf(desk.ECONFLICT, "artifact %s changed: If-Match %s does not match %s", art, im, fmtETag(cur.SHA256))
		}
	}
	a, err := s.Artifacts.Update(r.Context(), ses, art, desk.ArtifactPut{MediaType: mediaHint(r), Body: r.Body, Size: r.ContentLength})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) revertArtifact(w http.ResponseWriter, r *http.Request) error {
	ses, art, err := sessionArtifact(r)
	if err != nil {
		return err
	}
	a, err := s.Artifacts.Revert(r.Context(), ses, art)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) deleteArtifact(w http.ResponseWriter, r *http.Request) error {
	ses, art, err := sessionArtifact(r)
	if err != nil {
		return err
	}
	if err := s.Artifacts.Delete(r.Context(), ses, art); err != nil {
		return err
	}
	return noContent(w)
}
