package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/session"
)

// maxDiff bounds the unified diff kept per file in the result.
const maxDiff = 64 << 10

type applyPatchArgs struct {
	Patch string `json:"patch" jsonschema_description:"the patch in the Codex format: '*** Begin Patch', then file operations ('*** Add File: <path>' with '+' lines; '*** Delete File: <path>'; '*** Update File: <path>', optionally '*** Move to: <path>', then chunks that start with '@@' or '@@ <a line to find first>' and hold ' ' context, '-' removed and '+' added lines, '*** End of File' anchoring a chunk at the end), then '*** End Patch'. Paths are guest paths; a relative path is taken from the default working directory."`
}

type applyPatch struct{ args[applyPatchArgs] }

func (applyPatch) Name() string { return "apply_patch" }
func (applyPatch) Description() string {
	return "Add, update, move and delete files with one patch in the Codex apply_patch format. The whole patch applies or nothing does: every target is checked against the write boundary (/artifacts but not /artifacts/immutable, /scratch, /workspace, writable host paths) and every chunk against the files before anything changes. Update chunks need 3 lines of context around each change, copied exactly; use '@@ <line>' (a class or function line) to say where a chunk is when the context repeats. Files under /artifacts become artifact revisions. Returns each changed file with its kind, added and removed line counts and a unified diff. May need approval (as write_file)."
}

// patchTarget is one file a parsed patch changes.
type patchTarget struct {
	op    patchOp
	guest string // cleaned guest path
	to    string // cleaned destination of a move, or ""
}

// targets resolves the guest paths of a parsed patch. A relative path is
// taken from the default working directory of exec_command.
func patchTargets(env *Env, ops []patchOp) ([]patchTarget, *Result) {
	base := ""
	resolve := func(p string) (string, *Result) {
		if !strings.HasPrefix(p, "/") {
			if base == "" {
				b, err := session.WorkDir(env.Jail, env.Workspace, env.View, "")
				if err != nil {
					return "", Fail(CodeBadInput, "%s is relative and there is no working directory to take it from; use an absolute guest path", p)
				}
				base = b
			}
			p = path.Join(base, p)
		}
		clean, err := fsjail.Clean(p)
		if err != nil {
			return "", Fail(CodeBadInput, "%s: %s", p, desk.ErrorMessage(err))
		}
		return clean, nil
	}
	var ts []patchTarget
	seen := map[string]bool{}
	for _, op := range ops {
		t := patchTarget{op: op}
		var bad *Result
		if t.guest, bad = resolve(op.Path); bad != nil {
			return nil, bad
		}
		if op.MoveTo != "" {
			if t.to, bad = resolve(op.MoveTo); bad != nil {
				return nil, bad
			}
			if t.to == t.guest {
				t.to = ""
			}
		}
		for _, g := range []string{t.guest, t.to} {
			if g == "" {
				continue
			}
			if seen[g] {
				return nil, Fail(CodeBadInput, "the patch changes %s twice; change each file once", g)
			}
			seen[g] = true
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func (t applyPatch) Gate(env *Env, raw json.RawMessage) (bool, string) {
	a, bad, err := t.decode(raw)
	if bad != nil || err != nil {
		return false, ""
	}
	ops, err := parsePatch(a.Patch)
	if err != nil {
		return false, "" // Run refuses it before anything changes
	}
	var what []string
	gated := false
	for _, op := range ops {
		for _, p := range []string{op.Path, op.MoveTo} {
			if p == "" {
				continue
			}
			// A relative path lands in the working directory, which may
			// be the user's files: gated.
			if !strings.HasPrefix(p, "/") || gatedPath(p) {
				gated = true
			}
		}
		w := op.Kind + " " + op.Path
		if op.MoveTo != "" {
			w = "move " + op.Path + " to " + op.MoveTo
		}
		what = append(what, w)
	}
	return gated, "apply patch: " + strings.Join(what, ", ")
}

// fileChange is one entry of apply_patch's result.
type fileChange struct {
	Path    string `json:"path"`
	From    string `json:"from,omitempty"` // a move's old path
	Kind    string `json:"kind"`           // add, update, delete, move
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
	Diff    string `json:"diff"`
	// DiffTruncated marks a diff cut at maxDiff.
	DiffTruncated bool   `json:"diff_truncated,omitempty"`
	ArtifactID    string `json:"artifact_id,omitempty"`
}

// staged is a change computed in full before anything is written.
type staged struct {
	t        patchTarget
	old      []byte // nil when the file did not exist
	new      []byte // nil for a delete
	existed  bool
	oldGuest string
	change   fileChange
}

func (t applyPatch) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	ops, err := parsePatch(a.Patch)
	if err != nil {
		return Fail(CodeBadInput, "the patch does not parse, so nothing changed: %s", err), nil
	}
	targets, bad := patchTargets(env, ops)
	if bad != nil {
		return nothingChanged(bad), nil
	}
	// 1. The whole target set against the write boundary.
	for _, tg := range targets {
		for _, g := range []string{tg.guest, tg.to} {
			if g == "" {
				continue
			}
			if res, err := checkWritable(ctx, env, g); res != nil || err != nil {
				return nothingChanged(res), err
			}
		}
	}
	// 2. Every new content, computed before anything is written.
	var plan []*staged
	for _, tg := range targets {
		s, res, err := stage(env, tg)
		if res != nil || err != nil {
			return nothingChanged(res), err
		}
		plan = append(plan, s)
	}
	// 3. Applied in order; a failure puts back what was already done.
	var undo []func()
	rollback := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	var arts []string
	for _, s := range plan {
		steps, res, err := commit(ctx, env, s, &arts)
		undo = append(undo, steps...)
		if res != nil || err != nil {
			rollback()
			return nothingChanged(res), err
		}
	}
	changes := make([]fileChange, 0, len(plan))
	var out strings.Builder
	added, removed := 0, 0
	for _, s := range plan {
		changes = append(changes, s.change)
		added += s.change.Added
		removed += s.change.Removed
		out.WriteString(s.change.Diff)
	}
	return &Result{
		Value:     map[string]any{"files": changes, "added": added, "removed": removed},
		Facts:     map[string]any{"files": changes, "added": added, "removed": removed},
		Output:    out.String(),
		Artifacts: arts,
	}, nil
}

// nothingChanged says so in a refusal's message.
func nothingChanged(r *Result) *Result {
	if r == nil || r.Code == "" {
		return r
	}
	return Fail(r.Code, "the patch was not applied, nothing changed: %s", r.Message)
}

// checkWritable refuses a guest path outside the write boundary, and an
// immutable artifact.
func checkWritable(ctx context.Context, env *Env, g string) (*Result, error) {
	if _, _, err := env.Jail.Writable(g); err != nil {
		if desk.ErrorCode(err) == desk.ENOTFOUND {
			return nil, nil // a file to create; its directory is made on write
		}
		return fsResult(err, g)
	}
	if rel := artifactRel(g); rel != "" {
		art, err := env.Store.ArtifactByPath(ctx, env.Session.ID, rel)
		switch {
		case err == nil && art.Immutable:
			return Fail(CodeImmutable, "%s is an immutable artifact; the agent cannot change it", g), nil
		case err != nil && !desk.IsCode(err, desk.ENOTFOUND):
			return nil, err
		}
	}
	return nil, nil
}

// readGuest reads a whole text file, nil when it does not exist.
func readGuest(env *Env, g string) ([]byte, *Result, error) {
	st, err := env.Jail.Stat(g)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return nil, nil, nil
	}
	if err != nil {
		res, err := fsResult(err, g)
		return nil, res, err
	}
	if st.Type != fsjail.TypeFile {
		return nil, Fail(CodeBadInput, "%s is not a file", g), nil
	}
	f, err := env.Jail.Open(g)
	if err != nil {
		res, err := fsResult(err, g)
		return nil, res, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxWrite+1))
	if err != nil {
		return nil, nil, err
	}
	if len(b) > maxWrite || !utf8.Valid(b) {
		return nil, Fail(CodeBadInput, "%s is not a text file apply_patch can change", g), nil
	}
	return b, nil, nil
}

func stage(env *Env, tg patchTarget) (*staged, *Result, error) {
	s := &staged{t: tg, oldGuest: tg.guest}
	old, res, err := readGuest(env, tg.guest)
	if res != nil || err != nil {
		return nil, res, err
	}
	s.old, s.existed = old, old != nil
	switch tg.op.Kind {
	case changeAdd:
		// As in Codex, an added file replaces one that is there.
		text := strings.Join(tg.op.Lines, "\n") + "\n"
		s.new = []byte(text)
		s.change = fileChange{Path: tg.guest, Kind: changeAdd}
	case changeDelete:
		if !s.existed {
			return nil, Fail(CodeNotFound, "%s does not exist, so it cannot be deleted", tg.guest), nil
		}
		s.change = fileChange{Path: tg.guest, Kind: changeDelete}
	case changeUpdate:
		if !s.existed {
			return nil, Fail(CodeNotFound, "%s does not exist, so it cannot be updated (use *** Add File)", tg.guest), nil
		}
		text := string(old)
		if len(tg.op.Chunks) > 0 {
			var err error
			if text, err = applyChunks(text, tg.guest, tg.op.Chunks); err != nil {
				return nil, Fail(CodeNotFound, "%s", err), nil
			}
		}
		s.new = []byte(text)
		s.change = fileChange{Path: tg.guest, Kind: changeUpdate}
		if tg.to != "" {
			if dest, res, err := readGuest(env, tg.to); res != nil || err != nil {
				return nil, res, err
			} else if dest != nil {
				return nil, Fail(CodeBadInput, "%s exists already; a move does not replace a file", tg.to), nil
			}
			s.change = fileChange{Path: tg.to, From: tg.guest, Kind: changeMove}
		}
	}
	if len(s.new) > maxWrite {
		return nil, Fail(CodeTooLarge, "%s would be %d bytes; apply_patch writes at most %d per file", s.change.Path, len(s.new), maxWrite), nil
	}
	from, to := "a"+tg.guest, "b"+s.change.Path
	oldText, newText := string(s.old), string(s.new)
	switch tg.op.Kind {
	case changeAdd:
		if !s.existed {
			from = "/dev/null"
		}
	case changeDelete:
		to, newText = "/dev/null", ""
	}
	d := udiff.Unified(from, to, oldText, newText)
	for _, l := range strings.Split(d, "\n") {
		switch {
		case strings.HasPrefix(l, "+++") || strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			s.change.Added++
		case strings.HasPrefix(l, "-"):
			s.change.Removed++
		}
	}
	if len(d) > maxDiff {
		cut := maxDiff
		for cut > 0 && !utf8.RuneStart(d[cut]) {
			cut--
		}
		d, s.change.DiffTruncated = d[:cut]+"\n[… diff truncated …]\n", true
	}
	s.change.Diff = d
	return s, nil, nil
}

// commit writes one staged change and returns the steps that undo it.
func commit(ctx context.Context, env *Env, s *staged, arts *[]string) ([]func(), *Result, error) {
	var undo []func()
	put := func(g string, b []byte) (*Result, error) {
		res, err := write(ctx, env, g, b)
		if err != nil || (res != nil && res.Code != "") {
			return res, err
		}
		if len(res.Artifacts) > 0 {
			*arts = append(*arts, res.Artifacts...)
			s.change.ArtifactID = res.Artifacts[0]
		}
		return nil, nil
	}
	restore := func(g string, prev []byte, existed bool) func() {
		return func() {
			if existed {
				_, _ = write(context.WithoutCancel(ctx), env, g, prev)
			} else {
				_ = removeGuest(context.WithoutCancel(ctx), env, g)
			}
		}
	}
	switch {
	case s.t.op.Kind == changeDelete:
		if err := removeGuest(ctx, env, s.t.guest); err != nil {
			res, err := fsResult(err, s.t.guest)
			return nil, res, err
		}
		undo = append(undo, restore(s.t.guest, s.old, true))
	case s.t.to != "":
		if res, err := put(s.t.to, s.new); res != nil || err != nil {
			return nil, res, err
		}
		undo = append(undo, restore(s.t.to, nil, false))
		if err := removeGuest(ctx, env, s.t.guest); err != nil {
			res, err := fsResult(err, s.t.guest)
			return undo, res, err
		}
		undo = append(undo, restore(s.t.guest, s.old, true))
	default:
		if res, err := put(s.t.guest, s.new); res != nil || err != nil {
			return nil, res, err
		}
		undo = append(undo, restore(s.t.guest, s.old, s.existed))
	}
	return undo, nil, nil
}

// removeGuest deletes a file: the artifact under /artifacts, the plain
// file elsewhere.
func removeGuest(ctx context.Context, env *Env, g string) error {
	r, root, err := env.Jail.Writable(g)
	if err != nil {
		return err
	}
	if rel := artifactRel(g); rel != "" {
		if art, err := env.Store.ArtifactByPath(ctx, env.Session.ID, rel); err == nil {
			if art.Immutable {
				return desk.Errorf(desk.ECONFLICT, "%s is an immutable artifact", g)
			}
			_, err := env.Paths.DeleteByPath(ctx, env.Session.ID, rel)
			return err
		}
	}
	if err := root.Remove(r.Rel); err != nil {
		return fmt.Errorf("remove %s: %w", g, err)
	}
	return nil
}
