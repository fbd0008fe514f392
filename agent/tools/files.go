package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/classify"
	"github.com/desk-runtime/desk/fsjail"
)

// maxRead bounds the text read_file returns in one call.
const maxRead = 64 << 10

// maxWrite bounds what one write_file or edit_file call may write.
const maxWrite = 16 << 20

// gatedPath reports whether writing guest path p needs approval: the
// workspace's own files and declared host paths do; the session's
// artifacts and the execution's scratch do not.
func gatedPath(p string) bool {
	clean, err := fsjail.Clean(p)
	if err != nil {
		return false // the call will fail on its own
	}
	return !under(clean, "/artifacts") && !under(clean, "/scratch")
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// artifactRel is the path of a guest file inside /artifacts, or "".
func artifactRel(p string) string {
	if rel, ok := strings.CutPrefix(p, "/artifacts/"); ok {
		return rel
	}
	return ""
}

type readFileArgs struct {
	Path   string `json:"path" jsonschema_description:"absolute guest path, such as /artifacts/notes.md"`
	Offset int    `json:"offset,omitempty" jsonschema:"minimum=0" jsonschema_description:"first line (0-based); default 0"`
	Limit  int    `json:"limit,omitempty" jsonschema:"minimum=1" jsonschema_description:"number of lines; default all, up to 64 KiB of text"`
}

type readFile struct{ args[readFileArgs] }

func (readFile) Name() string { return "read_file" }
func (readFile) Description() string {
	return "Read a file of the guest file system (/artifacts, /context, /scratch, /workspace, declared host paths). Text comes back as text (a window of lines with offset/limit for big files); PDF, ZIP and other binary files are described, never decoded as text."
}
func (readFile) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t readFile) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	st, err := env.Jail.Stat(a.Path)
	if err != nil {
		return fsResult(err, a.Path)
	}
	if st.Type != fsjail.TypeFile {
		return Fail(CodeBadInput, "%s is a directory; use list_files", a.Path), nil
	}
	f, err := env.Jail.Open(a.Path)
	if err != nil {
		return fsResult(err, a.Path)
	}
	defer f.Close()
	class, err := classify.Classify(st.Name, "", f, st.Size)
	if err != nil {
		return nil, err
	}
	facts := map[string]any{"path": a.Path, "size": st.Size, "kind": class.Kind}
	if !class.Text {
		return &Result{Value: map[string]any{"path": a.Path, "size": st.Size, "kind": class.Kind, "media_type": class.MediaType,
			"text": nil, "note": "this is " + classify.Describe(class.Kind) + "; it is not shown as text"}, Facts: facts}, nil
	}
	b, err := io.ReadAll(io.LimitReader(f, 8<<20))
	if err != nil {
		return nil, err
	}
	lines := strings.SplitAfter(string(b), "\n")
	if a.Offset > len(lines) {
		return badArg("offset", "%d is past the end (%s has %d lines)", a.Offset, a.Path, len(lines)), nil
	}
	end := len(lines)
	if a.Limit > 0 && a.Offset+a.Limit < end {
		end = a.Offset + a.Limit
	}
	text := strings.Join(lines[a.Offset:end], "")
	truncated := false
	if len(text) > maxRead {
		text, truncated = text[:maxRead], true
		for !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
	}
	res := map[string]any{"path": a.Path, "size": st.Size, "kind": class.Kind, "text": text, "lines": len(lines),
		"offset": a.Offset, "truncated": truncated || end < len(lines) || st.Size > 8<<20}
	return &Result{Value: res, Facts: facts, Output: text}, nil
}

type writeFileArgs struct {
	Path    string `json:"path" jsonschema_description:"absolute guest path of the file to write, such as /artifacts/report.md"`
	Content string `json:"content" jsonschema_description:"the whole new content of the file"`
}

type writeFile struct{ args[writeFileArgs] }

func (writeFile) Name() string { return "write_file" }
func (writeFile) Description() string {
	return "Write a whole file. A file under /artifacts is a durable artifact of this session (created, or updated in place keeping its id); /scratch is temporary; /workspace and host paths are the user's files (may need approval)."
}

// Gate: a call its schema refuses needs no approval; Run refuses it
// before touching anything.
func (t writeFile) Gate(_ *Env, raw json.RawMessage) (bool, string) {
	a, bad, err := t.decode(raw)
	if bad != nil || err != nil {
		return false, ""
	}
	return gatedPath(a.Path), "write " + a.Path
}

func (t writeFile) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	return write(ctx, env, a.Path, []byte(a.Content))
}

// write stores bytes at a guest path: as an artifact under /artifacts,
// atomically through the jail elsewhere.
func write(ctx context.Context, env *Env, guest string, content []byte) (*Result, error) {
	if len(content) > maxWrite {
		return Fail(CodeTooLarge, "content is %d bytes; one call writes at most %d", len(content), maxWrite), nil
	}
	clean, err := fsjail.Clean(guest)
	if err != nil {
		return fsResult(err, guest)
	}
	if _, _, err := env.Jail.Writable(clean); err != nil {
		return fsResult(err, guest)
	}
	if rel := artifactRel(clean); rel != "" {
		art, created, err := env.Paths.PutPath(ctx, env.Session.ID, rel, desk.ArtifactPathPut{Body: bytes.NewReader(content), Size: int64(len(content))})
		if err != nil {
			return fsResult(err, guest)
		}
		return &Result{
			Value:     map[string]any{"path": art.Path, "artifact_id": art.ID, "created": created, "revision": art.Revision, "kind": art.Kind, "size": art.Size},
			Facts:     map[string]any{"path": art.Path, "artifact_id": art.ID, "created": created, "size": art.Size},
			Artifacts: []string{art.ID},
		}, nil
	}
	r, root, err := env.Jail.Writable(clean)
	if err != nil {
		return fsResult(err, guest)
	}
	f, err := atomicfile.Create(root, r.Rel)
	if err != nil {
		return fsResult(err, guest)
	}
	defer f.Abort()
	if _, err := f.Write(content); err != nil {
		return nil, err
	}
	if err := f.Commit(); err != nil {
		return nil, err
	}
	return &Result{Value: map[string]any{"path": clean, "size": len(content)}, Facts: map[string]any{"path": clean, "size": len(content)}}, nil
}

type editFileArgs struct {
	Path       string `json:"path" jsonschema_description:"absolute guest path of a text file"`
	OldText    string `json:"old_text" jsonschema_description:"the exact text to replace, copied from the file; must occur exactly once unless replace_all"`
	NewText    string `json:"new_text" jsonschema_description:"the text to put in its place (may be empty)"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema_description:"replace every occurrence of old_text; default false"`
}

type editFile struct{ args[editFileArgs] }

func (editFile) Name() string { return "edit_file" }
func (editFile) Description() string {
	return "Replace exact text in a text file. old_text must occur exactly once (or set replace_all); the file is written whole, as write_file would."
}

func (t editFile) Gate(_ *Env, raw json.RawMessage) (bool, string) {
	a, bad, err := t.decode(raw)
	if bad != nil || err != nil {
		return false, ""
	}
	return gatedPath(a.Path), "edit " + a.Path
}

func (t editFile) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	if a.OldText == "" {
		return badArg("old_text", "is empty; use write_file to write a whole file"), nil
	}
	f, err := env.Jail.Open(a.Path)
	if err != nil {
		return fsResult(err, a.Path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxWrite+1))
	f.Close()
	if err != nil {
		return nil, err
	}
	if len(b) > maxWrite || !utf8.Valid(b) {
		return Fail(CodeBadInput, "%s is not a text file edit_file can change", a.Path), nil
	}
	text := string(b)
	n := strings.Count(text, a.OldText)
	switch {
	case n == 0:
		return Fail(CodeNotFound, "old_text does not occur in %s; read the file and copy the exact text", a.Path), nil
	case n > 1 && !a.ReplaceAll:
		return Fail(CodeAmbiguous, "old_text occurs %d times in %s; include more context so it is unique, or set replace_all", n, a.Path), nil
	}
	out := strings.Replace(text, a.OldText, a.NewText, -1)
	if !a.ReplaceAll {
		out = strings.Replace(text, a.OldText, a.NewText, 1)
	}
	res, err := write(ctx, env, a.Path, []byte(out))
	if res != nil && res.Code == "" {
		res.Facts["replacements"] = max(1, n*boolInt(a.ReplaceAll))
	}
	return res, err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

type listFilesArgs struct {
	Path string `json:"path,omitempty" jsonschema_description:"absolute guest path of a directory; default /"`
}

type listFiles struct{ args[listFilesArgs] }

func (listFiles) Name() string { return "list_files" }
func (listFiles) Description() string {
	return "List a directory of the guest file system (default /). Shows name, type, size and whether it is read-only."
}
func (listFiles) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t listFiles) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	if a.Path == "" {
		a.Path = "/"
	}
	ents, err := env.Jail.ReadDir(a.Path)
	if err != nil {
		return fsResult(err, a.Path)
	}
	out := make([]map[string]any, 0, len(ents))
	for _, e := range ents {
		if atomicfile.IsTemp(e.Name) {
			continue
		}
		out = append(out, map[string]any{"path": e.Path, "type": e.Type, "size": e.Size, "read_only": e.ReadOnly})
	}
	return &Result{Value: map[string]any{"path": a.Path, "entries": out}, Facts: map[string]any{"path": a.Path, "entries": len(out)}}, nil
}

type deleteFileArgs struct {
	Path string `json:"path" jsonschema_description:"absolute guest path of the file to delete"`
}

type deleteFile struct{ args[deleteFileArgs] }

func (deleteFile) Name() string { return "delete_file" }
func (deleteFile) Description() string {
	return "Delete a file. Deleting under /artifacts deletes that artifact; immutable artifacts cannot be deleted by the agent."
}

func (t deleteFile) Gate(_ *Env, raw json.RawMessage) (bool, string) {
	a, bad, err := t.decode(raw)
	if bad != nil || err != nil {
		return false, ""
	}
	return gatedPath(a.Path), "delete " + a.Path
}

func (t deleteFile) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	clean, err := fsjail.Clean(a.Path)
	if err != nil {
		return fsResult(err, a.Path)
	}
	r, root, err := env.Jail.Writable(clean)
	if err != nil {
		return fsResult(err, a.Path)
	}
	if rel := artifactRel(clean); rel != "" {
		if art, err := env.Store.ArtifactByPath(ctx, env.Session.ID, rel); err == nil {
			if art.Immutable {
				return Fail(CodeImmutable, "%s is an immutable artifact; the agent cannot delete it", clean), nil
			}
			if _, err := env.Paths.DeleteByPath(ctx, env.Session.ID, rel); err != nil {
				return fsResult(err, a.Path)
			}
			return &Result{Value: map[string]any{"path": clean, "deleted": true, "artifact_id": art.ID},
				Facts: map[string]any{"path": clean, "artifact_id": art.ID}}, nil
		}
	}
	if st, err := root.Lstat(r.Rel); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Fail(CodeNotFound, "%s does not exist", clean), nil
		}
		return nil, err
	} else if st.IsDir() {
		return Fail(CodeBadInput, "%s is a directory; delete_file deletes files", clean), nil
	}
	if err := root.Remove(r.Rel); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return &Result{Value: map[string]any{"path": clean, "deleted": true}, Facts: map[string]any{"path": clean}}, nil
}
