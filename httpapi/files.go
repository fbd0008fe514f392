package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/httpdoor"
)

// actorParam documents the Wesclaw actor parameter.
var actorParam = param{Name: "actor", Type: "string",
	Doc: "whose file area: an actor id or name, honoured only for the admin token (default: the workspace's owner); an actor token may name only itself"}

// filesRoutes serves the actor file area twice: exactly as the Wesclaw seed
// names the routes (cell id = workspace id) and under /v1/workspaces/{ws}.
func filesRoutes() []route {
	var rs []route
	for _, base := range []string{"/cells/{id}/workspace", "/v1/workspaces/{ws}"} {
		rs = append(rs,
			route{Method: "GET", Path: base + "/files", Tag: "files", Summary: "List an actor's files in path order, streamed. depth 1 (default) lists the folder itself, n lists n levels, 0 means no limit; a path naming a file lists that file.",
				Query: []param{actorParam, {Name: "path", Type: "string", Doc: "folder (or file) to list, relative to the area; default /"},
					{Name: "depth", Type: "integer", Doc: "levels to list: 1 by default, 0 for no limit"}},
				Resp: "FileList", Status: 200, handle: (*Server).listFiles},
			route{Method: "GET", Path: base + "/file", Tag: "files", Summary: "Download a file's raw bytes (Range, ETag, Last-Modified and conditional requests; never compressed).",
				Query: []param{actorParam, {Name: "path", Type: "string", Required: true, Doc: "file path, e.g. /reports/summary.pdf"}},
				Resp:  "binary", Status: 200, handle: (*Server).fileContent},
			route{Method: "POST", Path: base + "/upload", Tag: "files", Summary: "Upload the body to path: streamed to a temporary file, fsynced and renamed over the target; folders are created. Under /sessions/<ses>/ the file is that session's artifact.",
				Query: []param{actorParam, {Name: "path", Type: "string", Required: true, Doc: "file path to write, e.g. /reports/new-report.pdf"}},
				Body:  "binary", Resp: "FileUpload", Status: 200, handle: (*Server).uploadFile},
			route{Method: "DELETE", Path: base + "/file", Tag: "files", Summary: "Delete a file (or an empty folder); in a session folder the artifact's row, bytes and revisions go together.",
				Query: []param{actorParam, {Name: "path", Type: "string", Required: true, Doc: "file path to delete"}},
				Resp:  "DeleteReport", Status: 200, handle: (*Server).deleteFile},
			route{Method: "DELETE", Path: base + "/delete-by-prefix", Tag: "files", Summary: "Delete every path that starts with prefix: /temp/ deletes that folder's subtree, /temp deletes every path starting with that string. / is refused. Streams what was deleted.",
				Query: []param{actorParam, {Name: "prefix", Type: "string", Required: true, Doc: "path prefix; a trailing / means a folder's contents"}},
				Resp:  "DeleteReport", Status: 200, handle: (*Server).deleteByPrefix},
			route{Method: "GET", Path: base + "/stats", Tag: "files", Summary: "Measure an actor's area: files, folders, bytes, artifacts, totals per top-level folder, quota and use.",
				Query: []param{actorParam}, Resp: "FileStats", Status: 200, handle: (*Server).fileStats},
			route{Method: "POST", Path: base + "/gc", Tag: "files", Summary: "Collect what nothing owns in the workspace (admin): scratch of executions not running, abandoned temporary files, unreachable items, orphaned revisions; mark rows whose file vanished missing and index files without a row. Never deletes an artifact or a user file.",
				Resp: "GCReport", Status: 200, handle: (*Server).workspaceGC},
		)
	}
	return append(rs, route{Method: "PATCH", Path: "/v1/workspaces/{ws}", Tag: "workspaces", Summary: "Set a workspace's host paths and primary root (admin). desk only checks a host path's boundary: it never creates, changes, collects or exports it.",
		Body: "WorkspacePatch", Resp: "Workspace", Status: 200, handle: (*Server).patchWorkspace})
}

// fileScope reads whose area a request names; the Wesclaw routes call the
// workspace a cell.
func fileScope(r *http.Request) (desk.FileScope, error) {
	ws := r.PathValue("ws")
	if ws == "" {
		ws = r.PathValue("id")
	}
	if !desk.HasPrefix(ws, desk.PrefixWorkspace) {
		return desk.FileScope{}, desk.Errorf(desk.ENOTFOUND, "workspace %q not found", ws)
	}
	return desk.FileScope{WorkspaceID: ws, Actor: r.URL.Query().Get("actor")}, nil
}

// entryStream writes {"<key>":[entry, entry, …], <summary fields>} as the
// entries arrive, so a listing of a hundred thousand files is never built
// in memory. Nothing is written until the first entry (or the end), so a
// refusal before that is still an ordinary JSON error.
type entryStream struct {
	w       http.ResponseWriter
	bw      *bufio.Writer
	key     string
	started bool
}

func newEntryStream(w http.ResponseWriter, key string) *entryStream {
	return &entryStream{w: w, key: key}
}

func (st *entryStream) start() {
	if st.started {
		return
	}
	st.started = true
	h := st.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	st.w.WriteHeader(http.StatusOK)
	st.bw = bufio.NewWriterSize(st.w, 64<<10)
	st.bw.WriteString(`{"` + st.key + `":[`)
}

func (st *entryStream) add(e desk.FileEntry, first bool) error {
	st.start()
	if !first {
		st.bw.WriteByte(',')
	}
	b := appendEntry(st.bw.AvailableBuffer(), e)
	_, err := st.bw.Write(b)
	return err
}

// finish closes the array and appends the summary object's fields (and an
// in-band error, when the operation failed after the stream began).
func (st *entryStream) finish(summary any, err error) error {
	st.start()
	st.bw.WriteString("]")
	if err != nil {
		b, _ := json.Marshal(map[string]string{"code": desk.ErrorCode(err), "message": desk.ErrorMessage(err)})
		st.bw.WriteString(`,"error":`)
		st.bw.Write(b)
	}
	if summary != nil {
		b, _ := json.Marshal(summary)
		if len(b) > 2 {
			st.bw.WriteByte(',')
			st.bw.Write(b[1 : len(b)-1])
		}
	}
	st.bw.WriteString("}\n")
	return st.bw.Flush()
}

// appendEntry encodes a FileEntry exactly as encoding/json would, without
// reflection: listings encode one per file, and this is their hot path.
func appendEntry(b []byte, e desk.FileEntry) []byte {
	b = append(b, `{"path":`...)
	b = appendJSONString(b, e.Path)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, e.Size, 10)
	b = append(b, `,"modified":"`...)
	b = e.Modified.AppendFormat(b, "2006-01-02T15:04:05.999999999Z07:00")
	b = append(b, '"')
	if e.Kind != "" {
		b = append(b, `,"kind":`...)
		b = appendJSONString(b, e.Kind)
	}
	if e.SHA256 != "" {
		b = append(b, `,"sha256":`...)
		b = appendJSONString(b, e.SHA256)
	}
	if e.ArtifactID != "" {
		b = append(b, `,"artifact_id":`...)
		b = appendJSONString(b, e.ArtifactID)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string. Plain ASCII (every path
// desk makes, most people's) is copied as is; anything else takes
// encoding/json's path.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) error {
	scope, err := fileScope(r)
	if err != nil {
		return err
	}
	opts := desk.FileListOptions{Path: r.URL.Query().Get("path"), Depth: 1}
	if v := r.URL.Query().Get("depth"); v != "" {
		if opts.Depth, err = strconv.Atoi(v); err != nil {
			return desk.Errorf(desk.EINVALID, "query parameter depth=%q must be an integer (1 by default, 0 for no limit)", v)
		}
	}
	st := newEntryStream(w, "entries")
	n := 0
	listing, err := s.Files.List(r.Context(), scope, opts, func(e desk.FileEntry) error {
		n++
		return st.add(e, n == 1)
	})
	if err != nil {
		if !st.started {
			return err
		}
		// A listing cannot carry an error after its entries; cut the
		// response so the client sees an incomplete body, not a short
		// listing that looks whole.
		s.logFailure(r, "listing failed part-way", err, desk.LogPath, r.URL.Path)
		panic(http.ErrAbortHandler)
	}
	return st.finish(listing, nil)
}

// fileETag names one version of a file's bytes by its size and its
// modification time in nanoseconds: an upload renames a freshly written
// file over the old one, so both change whenever the bytes are replaced.
func fileETag(e desk.FileEntry) string {
	return fmt.Sprintf(`"%x-%x"`, e.Size, e.Modified.UnixNano())
}

func (s *Server) fileContent(w http.ResponseWriter, r *http.Request) error {
	scope, err := fileScope(r)
	if err != nil {
		return err
	}
	f, e, err := s.Files.Open(r.Context(), scope, r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	defer f.Close()
	h := w.Header()
	name := path.Base(e.Path)
	h.Set("Content-Type", guestMediaType(name, f, e.Size))
	h.Set("ETag", fileETag(e))
	h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": name}))
	if e.ArtifactID != "" {
		h.Set("X-Desk-Artifact", e.ArtifactID)
	}
	safeBytes(h)
	// ServeContent answers Range and conditional requests and, for a whole
	// *os.File on a TCP connection, hands the copy to sendfile.
	http.ServeContent(w, r, name, e.Modified, f)
	return nil
}

func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) error {
	scope, err := fileScope(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if q.Get("path") == "" {
		return desk.Errorf(desk.EINVALID, "query parameter path is required, e.g. path=/reports/new-report.pdf")
	}
	in := desk.FilePut{Path: q.Get("path"), MediaType: mediaHint(r), Body: r.Body, Size: r.ContentLength}
	if conn, body, ok := rawBody(w, r); ok {
		body = watchConn(r, conn, body) // the body deadlines hold on the raw socket too
		defer conn.Close()
		in.Body = body
		up, err := s.Files.Upload(r.Context(), scope, in)
		if err != nil && desk.ErrorCode(err) == desk.EINTERNAL {
			s.logFailure(r, "request failed", err, desk.LogMethod, r.Method, desk.LogPath, r.URL.Path)
		}
		writeRaw(conn, up, err)
		if err != nil {
			lingerClose(conn)
		}
		return nil
	}
	up, err := s.Files.Upload(r.Context(), scope, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, up)
	return nil
}

// rawMin is the smallest declared upload that bypasses net/http's body
// reader (see rawBody).
const rawMin = 32 << 20

// rawBody takes over the connection of a large HTTP/1.x upload with a
// declared length and returns the body as a reader over the socket itself.
// net/http hands a body out only through its own reader, which costs a
// copy through user space per byte; over the raw socket the kernel splices
// the bytes straight into the page cache (os.File.ReadFrom), which on
// loopback measured about 40% faster for 1 GiB. The handler then owns the
// connection: it answers with writeRaw and closes it.
//
// The returned body sends "100 Continue" only when it is first read, so an
// upload refused before its bytes are needed (quota, a bad path) is still
// refused before the client sends them.
func rawBody(w http.ResponseWriter, r *http.Request) (net.Conn, io.Reader, bool) {
	if r.ContentLength < rawMin || r.ProtoMajor != 1 || len(r.TransferEncoding) > 0 {
		return nil, nil, false
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, false
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, false
	}
	// Bytes of the body that net/http read ahead with the headers.
	n := min(int64(rw.Reader.Buffered()), r.ContentLength)
	head, _ := rw.Reader.Peek(int(n))
	head = bytes.Clone(head)
	var cont io.Reader = eof{}
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		cont = &continueOnRead{conn: conn}
	}
	return conn, io.MultiReader(cont, bytes.NewReader(head), io.LimitReader(conn, r.ContentLength-n)), true
}

type eof struct{}

func (eof) Read([]byte) (int, error) { return 0, io.EOF }

// continueOnRead sends "100 Continue" the first time the body is read.
type continueOnRead struct {
	conn net.Conn
	sent bool
}

func (c *continueOnRead) Read([]byte) (int, error) {
	if !c.sent {
		c.sent = true
		if _, err := io.WriteString(c.conn, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return 0, err
		}
	}
	return 0, io.EOF
}

// lingerClose lets a client that is still sending a refused body read the
// answer: closing a socket with unread data resets the connection, and a
// reset can overtake the answer. It stops sending, then discards what
// arrives for a short while, as net/http does for its own connections.
func lingerClose(conn net.Conn) {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, _ = io.CopyN(io.Discard, conn, 256<<20)
}

// writeRaw answers on a taken-over connection with the same JSON the
// normal path writes, and asks the client to close: whatever followed the
// body on the connection was never read.
func writeRaw(conn net.Conn, v any, err error) {
	status := http.StatusOK
	if err != nil {
		var b ErrorBody
		b.Error.Code, b.Error.Message = desk.ErrorCode(err), desk.ErrorMessage(err)
		status, v = httpdoor.StatusOf(b.Error.Code), b
	}
	body, _ := json.Marshal(v)
	body = append(body, '\n')
	fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) error {
	scope, err := fileScope(r)
	if err != nil {
		return err
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		return desk.Errorf(desk.EINVALID, "query parameter path is required")
	}
	return s.streamDelete(w, func(fn func(desk.FileEntry) error) (*desk.DeleteSummary, error) {
		return s.Files.Delete(r.Context(), scope, p, fn)
	})
}

func (s *Server) deleteByPrefix(w http.ResponseWriter, r *http.Request) error {
	scope, err := fileScope(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if !q.Has("prefix") {
		return desk.Errorf(desk.EINVALID, "query parameter prefix is required, e.g. prefix=/temp/")
	}
	return s.streamDelete(w, func(fn func(desk.FileEntry) error) (*desk.DeleteSummary, error) {
		return s.Files.DeleteByPrefix(r.Context(), scope, q.Get("prefix"), fn)
	})
}

// streamDelete reports deletions as they happen. A failure before the
// first deletion is an ordinary error; after it, the report says what was
// deleted and carries the error in-band, because what was deleted is gone
// and the caller must be told.
func (s *Server) streamDelete(w http.ResponseWriter, run func(func(desk.FileEntry) error) (*desk.DeleteSummary, error)) error {
	st := newEntryStream(w, "deleted")
	n := 0
	sum, err := run(func(e desk.FileEntry) error {
		n++
		return st.add(e, n == 1)
	})
	if err != nil && !st.started {
		return err
	}
	return st.finish(sum, err)
}

func (s *Server) fileStats(w http.ResponseWriter, r *http.Request) error {
	scope, err := fileScope(r)
	if err != nil {
		return err
	}
	st, err := s.Files.Stats(r.Context(), scope)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) workspaceGC(w http.ResponseWriter, r *http.Request) error {
	scope, err := fileScope(r)
	if err != nil {
		return err
	}
	rep, err := s.Files.GC(r.Context(), scope.WorkspaceID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

func (s *Server) patchWorkspace(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	var in struct {
		desk.WorkspacePatchRequest
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	ws, err := s.Files.PatchWorkspace(r.Context(), id, desk.WorkspacePatch{HostPaths: in.HostPaths, PrimaryRoot: in.PrimaryRoot})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ws)
	return nil
}
