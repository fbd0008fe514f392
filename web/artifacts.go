package web

import (
	"html/template"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
)

// shelf is a session's artifact shelf.
type shelf struct {
	Ses   string
	WS    string
	Items []*desk.Artifact
	Count int
	Total int64
}

func newShelf(x *desk.Session, arts []*desk.Artifact) *shelf {
	sh := &shelf{Ses: x.ID, WS: x.WorkspaceID, Count: len(arts)}
	// Newest first: what a turn just made is at the top.
	for i := len(arts) - 1; i >= 0; i-- {
		sh.Items = append(sh.Items, arts[i])
		sh.Total += arts[i].Size
	}
	return sh
}

func (s *Server) shelfFragment(w http.ResponseWriter, r *request) error {
	x, err := s.session(r)
	if err != nil {
		return err
	}
	arts, err := s.d.Artifacts.List(r.Context(), x.ID)
	if err != nil {
		return err
	}
	return s.writeFragments(w, part{"shelf-oob", newShelf(x, arts)})
}

// maxPreviewText bounds how much of a text artifact a preview renders.
const maxPreviewText = 512 << 10

// preview is what the preview pane shows of one artifact.
type preview struct {
	A       *desk.Artifact
	Ses     string
	Mode    string // image, markdown, text, html, pdf, empty, card
	HTML    template.HTML
	Text    string
	Clipped bool
}

// previewMode decides how an artifact is shown, from the kind the
// classifier found in its bytes (never from its name): HTML only in a
// sandboxed frame, PDF in a sandboxed frame, ZIP and other binaries never as
// text.
func previewMode(kind string) string {
	switch kind {
	case "png", "jpeg", "gif", "webp", "svg":
		return "image"
	case "markdown":
		return "markdown"
	case "text", "json", "csv", "tsv":
		return "text"
	case "html":
		return "html"
	case "pdf":
		return "pdf"
	case "empty":
		return "empty"
	}
	return "card"
}

func (s *Server) preview(w http.ResponseWriter, r *request) error {
	x, err := s.session(r)
	if err != nil {
		return err
	}
	a, f, err := s.d.Artifacts.Open(r.Context(), x.ID, r.PathValue("art"))
	if err != nil {
		return err
	}
	defer f.Close()
	p := &preview{A: a, Ses: x.ID, Mode: previewMode(a.Kind)}
	if p.Mode == "markdown" || p.Mode == "text" {
		b, err := io.ReadAll(io.LimitReader(f, maxPreviewText+1))
		if err != nil {
			return err
		}
		if len(b) > maxPreviewText {
			b, p.Clipped = b[:maxPreviewText], true
		}
		text := strings.ToValidUTF8(string(b), "\uFFFD")
		if p.Mode == "markdown" {
			p.HTML = markdown(text)
		} else {
			p.Text = text
		}
	}
	return s.render(w, "preview", p)
}

// rawCSP is the policy of artifact bytes shown inside desk: a sandbox of
// their own (an opaque origin, even when opened directly), nothing loaded
// from anywhere, and framing only by desk's own preview pane. Scripts run
// only in HTML previews, where the sandbox keeps them away from desk.
const (
	rawCSP     = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'"
	rawHTMLCSP = "sandbox allow-scripts; default-src 'none'; img-src data: blob:; media-src data: blob:; " +
		"style-src 'unsafe-inline'; script-src 'unsafe-inline'; font-src data:; frame-ancestors 'self'"
)

// artifactRaw serves an artifact's bytes: inline for previews (images, the
// sandboxed HTML and PDF frames), as a download with ?download=1.
func (s *Server) artifactRaw(w http.ResponseWriter, r *request) error {
	x, err := s.session(r)
	if err != nil {
		return err
	}
	a, f, err := s.d.Artifacts.Open(r.Context(), x.ID, r.PathValue("art"))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	serveBytes(w, r.Request, a.Name, a.Kind, a.MediaType, a.SHA256, st.ModTime(), f, r.URL.Query().Get("download") != "")
	return nil
}

// serveBytes sends file bytes with headers that keep them from ever acting
// as a page of desk.
func serveBytes(w http.ResponseWriter, r *http.Request, name, kind, mediaType, sha string, mod time.Time, f io.ReadSeeker, download bool) {
	h := w.Header()
	h.Set("Content-Security-Policy", rawCSP)
	h.Set("Cache-Control", "private, no-cache")
	if sha != "" {
		h.Set("ETag", `"`+sha+`"`)
	}
	ct := mediaType
	if ct == "" {
		ct = "application/octet-stream"
	}
	switch previewMode(kind) {
	case "html":
		h.Set("Content-Security-Policy", rawHTMLCSP)
	case "text", "markdown":
		// Shown as text, whatever the bytes claim.
		ct = "text/plain; charset=utf-8"
	}
	h.Set("Content-Type", ct)
	disp := "inline"
	if download {
		disp = "attachment"
	} else {
		h.Set("X-Frame-Options", "SAMEORIGIN")
	}
	h.Set("Content-Disposition", mime.FormatMediaType(disp, map[string]string{"filename": downloadName(name)}))
	http.ServeContent(w, r, "", mod, f)
}

func downloadName(name string) string {
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	if !utf8.ValidString(name) || name == "." || name == "/" {
		return "download"
	}
	return name
}

func (s *Server) uploadArtifact(w http.ResponseWriter, r *request) error {
	x, err := s.session(r)
	if err != nil {
		return err
	}
	name := strings.TrimSpace(r.URL.Query().Get("name"))
	if name == "" {
		return desk.Errorf(desk.EINVALID, "an upload needs ?name=")
	}
	size := r.ContentLength
	if size < 0 {
		size = -1
	}
	if _, err := s.d.Artifacts.Create(r.Context(), x.ID, desk.ArtifactPut{Name: name, Body: r.Body, Size: size,
		MediaType: r.Header.Get("Content-Type")}); err != nil {
		return err
	}
	arts, err := s.d.Artifacts.List(r.Context(), x.ID)
	if err != nil {
		return err
	}
	return s.writeFragments(w, part{"shelf-oob", newShelf(x, arts)})
}

func (s *Server) deleteArtifact(w http.ResponseWriter, r *request) error {
	x, err := s.session(r)
	if err != nil {
		return err
	}
	if err := s.d.Artifacts.Delete(r.Context(), x.ID, r.PathValue("art")); err != nil {
		return err
	}
	arts, err := s.d.Artifacts.List(r.Context(), x.ID)
	if err != nil {
		return err
	}
	return s.writeFragments(w, part{"shelf-oob", newShelf(x, arts)}, part{"preview-empty-oob", nil})
}
