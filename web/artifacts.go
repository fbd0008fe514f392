package web

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/classify"
)

// shelf is a session's artifact shelf.
type shelf struct {
	Ses   string
	WS    string
	Items []*desk.Artifact
	Count int
	Total int64
	At    int64
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
	Mode    string // image, markdown, text, html, site, pdf, table, doc, canvas, empty, card
	HTML    template.HTML
	Text    string
	Clipped bool
	Table   *table
	Paras   []para
	Canvas  *canvasInfo
	// Problem says why a table, document or canvas could not be shown
	// (the file card is shown instead).
	Problem string
}

// previewMode decides how an artifact is shown, from the kind the
// classifier found in its bytes (never from its name): HTML only in a
// sandboxed frame, PDF through pdf.js, workbooks and documents as rows and
// paragraphs rendered on the server, ZIP and other binaries never as text.
// The PawWork kinds preview as their canvas row of the open-artifact table
// says: a site in the frame, a workbook as a table, a document as text, a
// canvas as a file card describing its drawing.
func previewMode(kind string) string {
	switch kind {
	case "png", "jpeg", "gif", "webp", "svg":
		return "image"
	case "markdown":
		return "markdown"
	case "text", "json":
		return "text"
	case "csv", "tsv", "xlsx", classify.JSONWorkbook:
		return "table"
	case "docx", classify.JSONDocument:
		return "doc"
	case classify.JSONCanvas:
		return "canvas"
	case "html":
		return "html"
	case classify.HTMLSite:
		return "site"
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
	switch p.Mode {
	case "markdown", "text":
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
	case "table", "doc", "canvas":
		if err := p.document(a, f); err != nil {
			// A document that cannot be read is still a file: the card
			// says what went wrong instead of failing the pane.
			p.Mode, p.Problem = "card", err.Error()
		}
	}
	return s.render(w, "preview", p)
}

// document fills a table, document or canvas preview from the bytes.
func (p *preview) document(a *desk.Artifact, f io.ReadSeeker) error {
	switch a.Kind {
	case "csv", "tsv":
		comma := ','
		if a.Kind == "tsv" {
			comma = '\t'
		}
		t, err := csvTable(io.LimitReader(f, maxPreviewText), comma)
		if err != nil {
			return err
		}
		p.Table, p.Clipped = t, a.Size > maxPreviewText
		return nil
	case "xlsx", "docx":
		if a.Size > maxOfficePreview {
			return fmt.Errorf("the file is larger than the %d MiB a preview reads", maxOfficePreview>>20)
		}
		if a.Kind == "xlsx" {
			t, err := xlsxTable(f)
			p.Table = t
			return err
		}
		ra, ok := f.(io.ReaderAt)
		if !ok {
			// Bytes streamed from a blob store: the zip reader needs
			// random access, and the size is bounded above.
			b, err := io.ReadAll(io.LimitReader(f, a.Size))
			if err != nil {
				return err
			}
			ra = bytes.NewReader(b)
		}
		paras, more, err := docxParas(ra, a.Size)
		p.Paras, p.Clipped = paras, more
		return err
	}
	b, ok, err := readBounded(f, maxJSONPreview)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("the file is larger than the %d MiB a preview reads", maxJSONPreview>>20)
	}
	switch a.Kind {
	case classify.JSONWorkbook:
		p.Table, err = workbookTable(b)
	case classify.JSONDocument:
		p.Paras, p.Clipped, err = documentParas(b)
	default:
		p.Canvas, err = canvasSummary(b)
	}
	return err
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
	serveBytes(w, r.Request, a.Name, a.Kind, a.MediaType, a.SHA256, a.UpdatedAt, f, r.URL.Query().Get("download") != "")
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
	switch mode := previewMode(kind); {
	case mode == "html" || mode == "site":
		h.Set("Content-Security-Policy", rawHTMLCSP)
	case mode == "text" || mode == "markdown" || classify.IsJSON(kind) || kind == "csv" || kind == "tsv":
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
