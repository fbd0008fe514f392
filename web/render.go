package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer/html"

	"github.com/desk-runtime/desk"
)

// md renders Markdown as GitHub does (GFM: tables, strikethrough, task
// lists, autolinks) but never passes raw HTML through: goldmark without WithUnsafe
// drops raw HTML and dangerous link targets (javascript:, vbscript:…).
// Table alignment is an align attribute, not a style attribute, which the
// CSP would refuse.
var md = goldmark.New(
	goldmark.WithExtensions(extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute)),
		extension.Strikethrough, extension.Linkify, extension.TaskList),
	goldmark.WithRendererOptions(html.WithHardWraps()))

// markdown renders text to safe HTML.
func markdown(text string) template.HTML {
	var b bytes.Buffer
	if err := md.Convert([]byte(text), &b); err != nil {
		return template.HTML("<pre>" + template.HTMLEscapeString(text) + "</pre>")
	}
	// goldmark escapes text and omits raw HTML, so its output is safe.
	return template.HTML(b.String())
}

func funcs() template.FuncMap {
	return template.FuncMap{
		"markdown":  markdown,
		"stoppedBy": desk.StoppedBy,
		"blockNote": blockNote,
		"bytes":     humanBytes,
		"ago":       ago,
		"clock":     func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
		"hm":        func(t time.Time) string { return t.Local().Format("15:04") },
		"iso":       func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"pretty":    prettyJSON,
		"json":      func(v any) (string, error) { b, err := json.Marshal(v); return string(b), err },
		"kindIcon":  kindIcon,
		"join":      strings.Join,
		"dict": func(kv ...any) (map[string]any, error) {
			if len(kv)%2 != 0 {
				return nil, fmt.Errorf("dict needs pairs")
			}
			m := map[string]any{}
			for i := 0; i < len(kv); i += 2 {
				m[fmt.Sprint(kv[i])] = kv[i+1]
			}
			return m, nil
		},
		"add":     func(a, b int) int { return a + b },
		"icon":    icon,
		"base":    path.Base,
		"percent": func(f float64) int { return int(f + 0.5) },
		"deref": func(t *time.Time) time.Time {
			if t == nil {
				return time.Time{}
			}
			return *t
		},
		"short": func(s string, n int) string {
			r := []rune(s)
			if len(r) <= n {
				return s
			}
			return string(r[:n]) + "…"
		},
		"firstLine": func(s string) string {
			s = strings.TrimSpace(s)
			if i := strings.IndexByte(s, '\n'); i >= 0 {
				return s[:i] + " …"
			}
			return s
		},
	}
}

// render executes a named template into w with status 200.
func (s *Server) render(w http.ResponseWriter, name string, data any) error {
	return s.renderTo(w, http.StatusOK, name, data)
}

// renderStatus renders, logging (not returning) a template failure: the
// answer is already an error.
func (s *Server) renderStatus(w http.ResponseWriter, status int, name string, data any) {
	if err := s.renderTo(w, status, name, data); err != nil {
		s.log.Error("render", desk.LogTemplate, name, desk.LogErr, err)
	}
}

// renderTo renders into a buffer first, so a template failure becomes an
// error answer instead of half a page.
func (s *Server) renderTo(w http.ResponseWriter, status int, name string, data any) error {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if w.Header().Get("Cache-Control") == "" {
		w.Header().Set("Cache-Control", "no-store")
	}
	w.WriteHeader(status)
	_, err := w.Write(b.Bytes())
	return err
}

// fragment renders a named template to a string (for event streams and
// out-of-band swaps).
func (s *Server) fragment(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("render %s: %w", name, err)
	}
	return b.String(), nil
}

// writeFragments renders several templates one after the other into w.
func (s *Server) writeFragments(w http.ResponseWriter, parts ...part) error {
	var b bytes.Buffer
	for _, p := range parts {
		if err := s.tmpl.ExecuteTemplate(&b, p.name, p.data); err != nil {
			return fmt.Errorf("render %s: %w", p.name, err)
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, err := io.Copy(w, &b)
	return err
}

type part struct {
	name string
	data any
}

var iconName = regexp.MustCompile(`^[a-z][a-z-]*$`)

// icon is an inline reference to a symbol of the embedded sprite; icons
// are decoration, so they are hidden from assistive technology and every
// control that shows one carries its own label.
func icon(name string) template.HTML {
	if !iconName.MatchString(name) {
		name = "file"
	}
	return template.HTML(`<svg class="icon" aria-hidden="true" focusable="false"><use href="/static/icons.svg#` + name + `"></use></svg>`)
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return "now"
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	case d < 7*24*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	return t.Local().Format("Jan 2")
}

func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// kindIcon names the icon of an artifact or file kind.
func kindIcon(kind string) string {
	switch kind {
	case "markdown", "text", "json", "empty", "json-document", "json-canvas":
		return "doc"
	case "html", "html-site":
		return "globe"
	case "csv", "tsv", "json-workbook":
		return "sheet"
	case "png", "jpeg", "gif", "webp", "svg":
		return "image"
	case "pdf":
		return "pdf"
	case "zip":
		return "archive"
	case "xlsx", "docx", "pptx":
		return "sheet"
	case "dir":
		return "folder"
	}
	return "file"
}
