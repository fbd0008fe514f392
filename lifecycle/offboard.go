package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
)

// Files an offboarding leaves at the top of the departed directory; restore
// removes them again, so the restored directory is exactly what left.
const (
	HandoffFile     = "HANDOFF.md"
	OffboardingFile = "offboarding.json"
)

// Limits of the offboarding input.
const (
	maxReason = 2000
	maxNotes  = 64 << 10
)

// OffboardInput is the input of Offboard (see desk.OffboardInput).
type OffboardInput = desk.OffboardInput

// offboardData is the offboarding journal's data.
type offboardData struct {
	Reason     string            `json:"reason"`
	Notes      string            `json:"notes,omitempty"`
	Successors map[string]string `json:"successors,omitempty"`
	At         time.Time         `json:"at"`
	// Retired is set once the sessions to retire are chosen (the active
	// ones when the workspace stopped taking work); nil before.
	Retired []string `json:"retired,omitempty"`
	Chosen  bool     `json:"chosen,omitempty"`
}

// Offboard retires a workspace: refused with EBLOCKED while any execution
// of it runs; otherwise it writes HANDOFF.md and offboarding.json, retires
// the workspace's active sessions (identities kept, successors recorded)
// and moves its directory to departed-workspaces/<ws>. Offboarding a
// departed workspace changes nothing and answers Changed false.
func (s *Service) Offboard(ctx context.Context, ws string, in OffboardInput) (*OffboardResult, error) {
	if err := desk.RequireAdmin(ctx, "offboard a workspace"); err != nil {
		return nil, err
	}
	if err := desk.RefuseManager(ws, "offboarded"); err != nil {
		return nil, err
	}
	w, err := s.store.GetWorkspace(ctx, ws)
	if err != nil {
		return nil, err
	}
	if err := s.checkOffboard(ctx, w, &in); err != nil {
		return nil, err
	}
	if !in.HeldLease {
		release, err := s.acquire(ctx, desk.OpOffboard, ws)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return s.offboardLocked(ctx, ws, in)
}

func (s *Service) checkOffboard(ctx context.Context, w *desk.Workspace, in *OffboardInput) error {
	in.Reason = strings.TrimSpace(in.Reason)
	if in.Reason == "" {
		return desk.Errorf(desk.EINVALID, "reason is required: say why workspace %s is offboarded", w.ID)
	}
	if len(in.Reason) > maxReason || !utf8.ValidString(in.Reason) {
		return desk.Errorf(desk.EINVALID, "reason must be valid UTF-8 of at most %d bytes", maxReason)
	}
	if len(in.Notes) > maxNotes || !utf8.ValidString(in.Notes) {
		return desk.Errorf(desk.EINVALID, "notes must be valid UTF-8 of at most %d bytes", maxNotes)
	}
	for from, to := range in.Successors {
		x, err := s.store.GetSession(ctx, from)
		if err != nil || x.WorkspaceID != w.ID {
			return desk.Errorf(desk.EINVALID, "successors: %q is not a session of workspace %s", from, w.ID)
		}
		if to == from {
			return desk.Errorf(desk.EINVALID, "successors: session %s cannot succeed itself", from)
		}
		if _, err := s.store.GetSession(ctx, to); err != nil {
			return desk.Errorf(desk.EINVALID, "successors: the successor %q of %s is not a known session", to, from)
		}
	}
	return nil
}

// offboardLocked runs the offboarding; the caller holds the lease.
func (s *Service) offboardLocked(ctx context.Context, ws string, in OffboardInput) (*OffboardResult, error) {
	w, err := s.settled(ctx, ws)
	if err != nil {
		return nil, err
	}
	switch w.State {
	case desk.WorkspaceDeparted:
		return s.result(ctx, ws, false)
	case desk.WorkspaceActive:
	default:
		return nil, NotActive(w)
	}
	data := &offboardData{Reason: in.Reason, Notes: in.Notes, Successors: in.Successors, At: s.opts.Now()}
	j := newJournal(desk.OpOffboard, ws, s.owner())
	if err := s.journal(ctx, j, "begin", data); err != nil {
		return nil, err
	}
	if err := s.fail(desk.OpOffboard, "begin"); err != nil {
		return nil, err
	}
	// The catalog says offboarding before anything else changes; from now
	// on no execution of the workspace is admitted.
	if _, err := s.store.TransitionWorkspace(ctx, ws, desk.WorkspaceActive, desk.WorkspaceOffboarding, desk.CatalogChange{}, data.At); err != nil {
		_ = s.settle(ctx, j)
		return nil, err
	}
	if err := s.fail(desk.OpOffboard, "offboarding"); err != nil {
		return nil, err
	}
	if blockers, err := s.blockers(ctx, ws); err != nil || len(blockers) > 0 {
		if rerr := s.rollbackOffboard(ctx, j, data.At); rerr != nil {
			return nil, rerr
		}
		if err != nil {
			return nil, err
		}
		return nil, desk.Errorf(desk.EBLOCKED, "workspace %s cannot be offboarded while its work runs; blocked by %s; interrupt or wait for them first",
			ws, strings.Join(blockers, ", "))
	}
	// No execution runs or can be admitted now; the processes kept
	// between turns go too, before any file moves.
	if err := s.stopChildren(ctx, ws); err != nil {
		if rerr := s.rollbackOffboard(ctx, j, data.At); rerr != nil {
			return nil, rerr
		}
		return nil, err
	}
	if err := s.finishOffboard(ctx, j, data); err != nil {
		return nil, err
	}
	return s.result(ctx, ws, true)
}

// stopChildren stops the workspace's runtime children and waits for them.
func (s *Service) stopChildren(ctx context.Context, ws string) error {
	if s.opts.Children == nil {
		return nil
	}
	if err := s.opts.Children.StopWorkspace(ctx, ws); err != nil {
		return fmt.Errorf("stop the runtime processes of workspace %s: %w", ws, err)
	}
	return nil
}

// blockers lists the workspace's running executions.
func (s *Service) blockers(ctx context.Context, ws string) ([]string, error) {
	active, err := s.store.ListActiveExecutions(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, x := range active {
		if x.WorkspaceID != ws {
			continue
		}
		d := fmt.Sprintf("execution %s (%s) of session %s", x.ID, x.Phase, x.SessionID)
		if ses, err := s.store.GetSession(ctx, x.SessionID); err == nil {
			d = fmt.Sprintf("execution %s (%s) of session %s %s", x.ID, x.Phase, x.SessionID, ses.Signature)
		}
		out = append(out, d)
	}
	return out, nil
}

// rollbackOffboard puts an offboarding that did not pass its checks back
// to active, as if it never started.
func (s *Service) rollbackOffboard(ctx context.Context, j *desk.LifecycleJournal, at time.Time) error {
	if _, err := s.store.TransitionWorkspace(ctx, j.WorkspaceID, desk.WorkspaceOffboarding, desk.WorkspaceActive, desk.CatalogChange{}, at); err != nil {
		return err
	}
	return s.settle(ctx, j)
}

// finishOffboard carries an offboarding from the offboarding state to
// departed. Every step is idempotent, so recovery calls it again from
// wherever a crash stopped it.
func (s *Service) finishOffboard(ctx context.Context, j *desk.LifecycleJournal, data *offboardData) error {
	ws := j.WorkspaceID
	w, err := s.store.GetWorkspace(ctx, ws)
	if err != nil {
		return err
	}
	sessions, err := s.store.ListSessions(ctx, desk.SessionFilter{WorkspaceID: ws})
	if err != nil {
		return err
	}
	sort.Slice(sessions, func(a, b int) bool { return sessions[a].ID < sessions[b].ID })
	if !data.Chosen {
		// Retire the sessions that are active now; restore recalls exactly
		// these. The choice is journaled before any is retired.
		data.Retired = nil
		for _, x := range sessions {
			if x.Lifecycle == desk.SessionActive {
				data.Retired = append(data.Retired, x.ID)
			}
		}
		data.Chosen = true
		if err := s.journal(ctx, j, "retire", data); err != nil {
			return err
		}
	}
	src, dst := s.home.Workspace(ws), s.home.Departed(ws)
	h, err := s.handoff(ctx, w, data, sessions)
	if err != nil {
		return err
	}
	if ok, err := isDir(src); err != nil {
		return err
	} else if ok {
		if err := h.write(src); err != nil {
			return err
		}
	} else if ok, err := isDir(dst); err != nil {
		return err
	} else if !ok {
		// A workspace whose directories were never made departs as an
		// empty directory holding its handoff.
		if err := os.MkdirAll(src, 0o755); err != nil {
			return err
		}
		if err := h.write(src); err != nil {
			return err
		}
	}
	if err := s.fail(desk.OpOffboard, "handoff"); err != nil {
		return err
	}
	retired := desk.SessionRetired
	for _, id := range data.Retired {
		x, err := s.store.GetSession(ctx, id)
		if err != nil {
			if desk.IsCode(err, desk.ENOTFOUND) {
				continue // deleted since; nothing to retire
			}
			return err
		}
		if x.Lifecycle != desk.SessionRetired {
			if _, err := s.store.UpdateSession(ctx, id, desk.SessionUpdate{Lifecycle: &retired}); err != nil {
				return err
			}
		}
	}
	if err := s.fail(desk.OpOffboard, "retired"); err != nil {
		return err
	}
	if s.opts.Archive != nil {
		if err := s.opts.Archive.CloseWorkspace(ctx, ws); err != nil {
			return fmt.Errorf("close the archive files of %s: %w", ws, err)
		}
	}
	if err := s.journal(ctx, j, "move", data); err != nil {
		return err
	}
	if err := moveDir(src, dst, func(step string) error { return s.fail(desk.OpOffboard, "move-"+step) }); err != nil {
		return err
	}
	if err := s.fail(desk.OpOffboard, "moved"); err != nil {
		return err
	}
	md := h.markdown()
	at := data.At
	ch := desk.CatalogChange{Reason: &data.Reason, Notes: &data.Notes, Handoff: &md, Successors: data.Successors,
		RetiredSessions: data.Retired, OffboardedAt: &at}
	if ch.Successors == nil {
		ch.Successors = map[string]string{}
	}
	if ch.RetiredSessions == nil {
		ch.RetiredSessions = []string{}
	}
	if _, err := s.store.TransitionWorkspace(ctx, ws, desk.WorkspaceOffboarding, desk.WorkspaceDeparted, ch, s.opts.Now()); err != nil {
		return err
	}
	if err := s.fail(desk.OpOffboard, "departed"); err != nil {
		return err
	}
	s.log.Info("workspace offboarded", desk.LogWorkspaceID, ws, "reason", data.Reason, "retired_sessions", len(data.Retired), desk.LogPath, dst)
	return s.settle(ctx, j)
}

// result reads the catalog row into a Result.
func (s *Service) result(ctx context.Context, ws string, changed bool) (*Result, error) {
	e, err := s.store.GetCatalogEntry(ctx, ws)
	if err != nil {
		return nil, err
	}
	r := &Result{Workspace: e, Changed: changed}
	switch e.State {
	case desk.WorkspaceDeparted:
		r.Path = s.home.Departed(ws)
	case desk.WorkspaceActive:
		r.Path = s.home.Workspace(ws)
	}
	return r, nil
}

// handoff is what HANDOFF.md and offboarding.json say.
type handoff struct {
	WorkspaceID  string            `json:"workspace_id"`
	Name         string            `json:"name"`
	OffboardedAt time.Time         `json:"offboarded_at"`
	Reason       string            `json:"reason"`
	Notes        string            `json:"notes,omitempty"`
	Successors   map[string]string `json:"successors,omitempty"`
	Sessions     []handoffSession  `json:"sessions"`
	Queued       []handoffWork     `json:"queued"`
	Waiting      []handoffWork     `json:"waiting"`
	// Uncommitted lists `git status --porcelain` lines of the checkout,
	// when it is a git repository.
	Uncommitted []string `json:"uncommitted,omitempty"`
	GitError    string   `json:"git_error,omitempty"`
	IsGit       bool     `json:"is_git"`
	// Worktrees are the git worktrees of the checkout that sessions were
	// bound to (worktrees/<name>), each with its own uncommitted paths:
	// work there is as easy to lose track of as work in the checkout.
	Worktrees []handoffWorktree `json:"worktrees,omitempty"`
}

type handoffWorktree struct {
	Name        string   `json:"name"`
	Uncommitted []string `json:"uncommitted"`
	GitError    string   `json:"git_error,omitempty"`
}

type handoffSession struct {
	ID        string `json:"id"`
	Signature string `json:"signature"`
	Title     string `json:"title"`
	Actor     string `json:"actor"`
	// Lifecycle is the session's lifecycle when the workspace left.
	Lifecycle string `json:"lifecycle"`
	Retired   bool   `json:"retired_by_offboarding"`
	Successor string `json:"successor,omitempty"`
}

type handoffWork struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	Summary   string `json:"summary"`
}

func (s *Service) handoff(ctx context.Context, w *desk.Workspace, data *offboardData, sessions []*desk.Session) (*handoff, error) {
	h := &handoff{WorkspaceID: w.ID, Name: w.Name, OffboardedAt: data.At, Reason: data.Reason, Notes: data.Notes,
		Successors: data.Successors, Sessions: []handoffSession{}, Queued: []handoffWork{}, Waiting: []handoffWork{}}
	retired := map[string]bool{}
	for _, id := range data.Retired {
		retired[id] = true
	}
	for _, x := range sessions {
		lc := x.Lifecycle
		if retired[x.ID] {
			lc = desk.SessionActive
		}
		h.Sessions = append(h.Sessions, handoffSession{ID: x.ID, Signature: x.Signature, Title: x.Title, Actor: x.Actor,
			Lifecycle: lc, Retired: retired[x.ID], Successor: data.Successors[x.ID]})
		q, err := s.store.ListQueue(ctx, x.ID, true)
		if err != nil {
			return nil, err
		}
		for _, it := range q {
			h.Queued = append(h.Queued, handoffWork{Kind: it.Kind, ID: it.ID, SessionID: x.ID, Summary: summary(it.Text)})
		}
		aps, err := s.store.ListApprovals(ctx, x.ID, true)
		if err != nil {
			return nil, err
		}
		for _, a := range aps {
			h.Waiting = append(h.Waiting, handoffWork{Kind: "approval", ID: a.ID, SessionID: x.ID, Summary: summary(a.Tool + ": " + a.Summary)})
		}
		irs, err := s.store.ListInputRequests(ctx, x.ID)
		if err != nil {
			return nil, err
		}
		for _, r := range irs {
			if r.Status != desk.InputPending {
				continue
			}
			var qs []string
			for _, q := range r.Questions {
				qs = append(qs, q.Question)
			}
			h.Waiting = append(h.Waiting, handoffWork{Kind: "input_request", ID: r.ID, SessionID: x.ID, Summary: summary(strings.Join(qs, " / "))})
		}
	}
	dir := s.home.Workspace(w.ID)
	if _, err := os.Lstat(dir); err != nil {
		// The directory may already have left (recovery after the move).
		dir = s.home.Departed(w.ID)
	}
	h.IsGit, h.Uncommitted, h.GitError = uncommitted(ctx, filepath.Join(dir, layout.CheckoutDir))
	ents, _ := os.ReadDir(filepath.Join(dir, layout.WorktreesDir))
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		isGit, paths, gitErr := uncommitted(ctx, filepath.Join(dir, layout.WorktreesDir, e.Name()))
		if isGit {
			h.Worktrees = append(h.Worktrees, handoffWorktree{Name: e.Name(), Uncommitted: nonNilStrings(paths), GitError: gitErr})
		}
	}
	return h, nil
}

// summary is the first line of a text, at most 120 characters: enough to
// recognise the work, without copying transcripts into the catalog.
func summary(t string) string {
	t = strings.TrimSpace(t)
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		t = t[:i] + " …"
	}
	if utf8.RuneCountInString(t) > 120 {
		r := []rune(t)
		t = string(r[:120]) + "…"
	}
	return t
}

func (h *handoff) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Handoff: %s (%s)\n\n", h.Name, h.WorkspaceID)
	fmt.Fprintf(&b, "- Workspace: %s\n", h.WorkspaceID)
	fmt.Fprintf(&b, "- Offboarded: %s\n", h.OffboardedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "- Reason: %s\n", h.Reason)
	fmt.Fprintf(&b, "- Departed copy: departed-workspaces/%s\n\n", h.WorkspaceID)
	b.WriteString("## Sessions\n\n")
	if len(h.Sessions) == 0 {
		b.WriteString("None.\n")
	}
	for _, x := range h.Sessions {
		state := "was " + x.Lifecycle
		if x.Retired {
			state = "retired by this offboarding"
		}
		fmt.Fprintf(&b, "- %s `%s` %q (actor %s): %s\n", x.Signature, x.ID, x.Title, x.Actor, state)
	}
	b.WriteString("\n## Successors\n\n")
	if len(h.Successors) == 0 {
		b.WriteString("None.\n")
	}
	keys := make([]string, 0, len(h.Successors))
	for k := range h.Successors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "- `%s` → `%s`\n", k, h.Successors[k])
	}
	b.WriteString("\n## Queued work\n\n")
	if len(h.Queued) == 0 {
		b.WriteString("None.\n")
	}
	for _, q := range h.Queued {
		fmt.Fprintf(&b, "- `%s` in `%s` (%s): %s\n", q.ID, q.SessionID, q.Kind, q.Summary)
	}
	b.WriteString("\n## Waiting work\n\n")
	if len(h.Waiting) == 0 {
		b.WriteString("None.\n")
	}
	for _, q := range h.Waiting {
		fmt.Fprintf(&b, "- %s `%s` in `%s`: %s\n", q.Kind, q.ID, q.SessionID, q.Summary)
	}
	if h.IsGit {
		writeUncommitted(&b, "checkout/", h.GitError, h.Uncommitted)
	}
	for _, wt := range h.Worktrees {
		writeUncommitted(&b, "worktrees/"+wt.Name+"/", wt.GitError, wt.Uncommitted)
	}
	b.WriteString("\n## Notes\n\n")
	if strings.TrimSpace(h.Notes) == "" {
		b.WriteString("None.\n")
	} else {
		b.WriteString(strings.TrimRight(h.Notes, "\n") + "\n")
	}
	return b.String()
}

// write puts HANDOFF.md and offboarding.json at the top of dir, each
// written atomically.
func (h *handoff) write(dir string) error {
	j, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, HandoffFile), []byte(h.markdown())); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, OffboardingFile), append(j, '\n'))
}

func writeAtomic(p string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".desk-handoff-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	syncDir(filepath.Dir(p))
	return nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// writeUncommitted writes the handoff section listing one working tree's
// uncommitted paths (the checkout's or a worktree's).
func writeUncommitted(b *strings.Builder, dir, gitErr string, paths []string) {
	fmt.Fprintf(b, "\n## Uncommitted changes in %s\n\n", dir)
	switch {
	case gitErr != "":
		fmt.Fprintf(b, "git status failed: %s\n", gitErr)
	case len(paths) == 0:
		b.WriteString("None: the working tree was clean.\n")
	}
	for _, p := range paths {
		fmt.Fprintf(b, "- `%s`\n", p)
	}
}
