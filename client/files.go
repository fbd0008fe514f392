package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/desk-runtime/desk"
)

// The actor file area (Wesclaw workspace files) and workspace transfer.

// FileTarget names whose file area a call works on: the workspace and,
// for the admin token only, an actor (id or name; empty means the caller's
// own area, or the workspace owner's for the admin).
type FileTarget struct {
	Workspace string
	Actor     string
}

func (t FileTarget) path(op string, q url.Values) string {
	if t.Actor != "" {
		q.Set("actor", t.Actor)
	}
	return withQuery("/v1/workspaces/"+esc(t.Workspace)+"/"+op, q)
}

// ListFiles lists a folder (or one file) of the area in path order and
// calls fn for each entry as it arrives; a listing of any size is never
// held in memory. depth 1 lists the folder's own entries, 0 means no limit.
func (c *Client) ListFiles(ctx context.Context, t FileTarget, path string, depth int, fn func(desk.FileEntry) error) (*desk.FileListing, error) {
	q := url.Values{"depth": {strconv.Itoa(depth)}}
	if path != "" {
		q.Set("path", path)
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: t.path("files", q), size: -1})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out desk.FileListing
	if err := decodeEntries(resp.Body, "entries", fn, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// decodeEntries reads {"<key>":[entries…], summary fields…} as a stream,
// calling fn per entry and decoding the other fields into summary. An
// in-band "error" (a failure after the stream began) is returned as the
// *desk.Error it carries.
func decodeEntries(r io.Reader, key string, fn func(desk.FileEntry) error, summary any) error {
	dec := json.NewDecoder(r)
	bad := func(err error) error {
		return desk.Errorf(desk.EUNAVAILABLE, "the answer broke off or is not what desk sends: %v", err)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad(fmt.Errorf("want an object, got %v (%v)", tok, err))
	}
	rest := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		name, _ := tok.(string)
		if name != key {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return bad(err)
			}
			rest[name] = v
			continue
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			return bad(fmt.Errorf("want an array of entries (%v)", err))
		}
		for dec.More() {
			var e desk.FileEntry
			if err := dec.Decode(&e); err != nil {
				return bad(err)
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return bad(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return bad(err)
	}
	if raw, ok := rest["error"]; ok {
		var e desk.Error
		var eb struct{ Code, Message string }
		if json.Unmarshal(raw, &eb) == nil {
			e.Code, e.Message = eb.Code, eb.Message
			return &e
		}
	}
	b, _ := json.Marshal(rest)
	return json.Unmarshal(b, summary)
}

// FileDownload is a file being streamed, with what the response says
// about it. The caller closes Body.
type FileDownload struct {
	Body     io.ReadCloser
	Size     int64 // -1 when unknown
	Modified time.Time
	// ArtifactID is set when the file is an artifact of a session.
	ArtifactID string
}

// DownloadFile streams a file's raw bytes.
func (c *Client) DownloadFile(ctx context.Context, t FileTarget, path string) (*FileDownload, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: t.path("file", url.Values{"path": {path}}), size: -1})
	if err != nil {
		return nil, err
	}
	d := &FileDownload{Body: resp.Body, Size: resp.ContentLength, ArtifactID: resp.Header.Get("X-Desk-Artifact")}
	if lm, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		d.Modified = lm
	}
	return d, nil
}

// UploadFile streams body to path (size is its length or -1). In a
// session folder the file becomes that session's artifact.
func (c *Client) UploadFile(ctx context.Context, t FileTarget, path string, body io.Reader, size int64) (*desk.FileUpload, error) {
	resp, err := c.send(ctx, request{method: http.MethodPost, path: t.path("upload", url.Values{"path": {path}}),
		body: nonNilBody(body), size: size, contentType: "application/octet-stream"})
	if err != nil {
		return nil, err
	}
	var up desk.FileUpload
	if err := decodeBody(resp, &up); err != nil {
		return nil, err
	}
	return &up, nil
}

// DeleteFile deletes one file (or an empty folder) and reports it to fn.
func (c *Client) DeleteFile(ctx context.Context, t FileTarget, path string, fn func(desk.FileEntry) error) (*desk.DeleteSummary, error) {
	return c.deleteStream(ctx, t.path("file", url.Values{"path": {path}}), fn)
}

// DeleteByPrefix deletes every path that starts with prefix ("/temp/" is
// that folder's contents, "/temp" a string prefix), reporting each
// deletion to fn as the server makes it.
func (c *Client) DeleteByPrefix(ctx context.Context, t FileTarget, prefix string, fn func(desk.FileEntry) error) (*desk.DeleteSummary, error) {
	return c.deleteStream(ctx, t.path("delete-by-prefix", url.Values{"prefix": {prefix}}), fn)
}

func (c *Client) deleteStream(ctx context.Context, path string, fn func(desk.FileEntry) error) (*desk.DeleteSummary, error) {
	resp, err := c.send(ctx, request{method: http.MethodDelete, path: path, size: -1})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var sum desk.DeleteSummary
	if err := decodeEntries(resp.Body, "deleted", fn, &sum); err != nil {
		return &sum, err
	}
	return &sum, nil
}

// FileStats measures the area.
func (c *Client) FileStats(ctx context.Context, t FileTarget) (*desk.FileStats, error) {
	var st desk.FileStats
	if err := c.doJSON(ctx, http.MethodGet, t.path("stats", url.Values{}), nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// WorkspaceGC collects what nothing owns in the workspace (admin).
func (c *Client) WorkspaceGC(ctx context.Context, ws string) (*desk.GCReport, error) {
	var rep desk.GCReport
	if err := c.doJSON(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/gc", nil, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// WorkspacePatch sets host paths and the primary root; nil fields stay.
type WorkspacePatch = desk.WorkspacePatchRequest

// PatchWorkspace changes a workspace's host paths and primary root (admin).
func (c *Client) PatchWorkspace(ctx context.Context, ws string, p WorkspacePatch) (*desk.Workspace, error) {
	var w desk.Workspace
	if err := c.doJSON(ctx, http.MethodPatch, "/v1/workspaces/"+esc(ws), p, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// ExportWorkspace streams the workspace as a tar.gz (admin). The caller
// closes the reader; an export cut short fails when read (the gzip stream
// is incomplete), never as a clean end.
func (c *Client) ExportWorkspace(ctx context.Context, ws string, skipWorkspace bool) (io.ReadCloser, error) {
	q := url.Values{}
	if skipWorkspace {
		q.Set("skip_workspace", "true")
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: withQuery("/v1/workspaces/"+esc(ws)+"/export", q), size: -1})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// ImportWorkspace recreates a workspace from an export (admin); size is
// the archive's length or -1. With newTokens every actor gets a fresh
// token, returned once in the result.
func (c *Client) ImportWorkspace(ctx context.Context, body io.Reader, size int64, newTokens bool) (*desk.ImportResult, error) {
	q := url.Values{}
	if newTokens {
		q.Set("new_tokens", "true")
	}
	resp, err := c.send(ctx, request{method: http.MethodPost, path: withQuery("/v1/workspaces/import", q),
		body: nonNilBody(body), size: size, contentType: "application/gzip"})
	if err != nil {
		return nil, err
	}
	var res desk.ImportResult
	if err := decodeBody(resp, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
