package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
)

// ViewsDir is the directory of conversation views, relative to the
// workspace directory.
const ViewsDir = "conversations"

// viewsState is the file, inside ViewsDir, that remembers how far the views
// have read each archive file; deleting ViewsDir deletes it too, and the
// next rebuild starts from nothing.
const viewsState = ".desk-views.json"

type viewState struct {
	Version int                   `json:"version"`
	Files   map[string]int64      `json:"files"` // archive file (slash path below the archive dir) → bytes read
	Views   map[string]*viewEntry `json:"views"` // view file name → what is in it
}

type viewEntry struct {
	Channel      string `json:"channel"`
	Conversation string `json:"conversation_id"`
	LastDay      string `json:"last_day"`
	Size         int64  `json:"size"` // bytes of the view file as last written
}

type viewUpdate struct {
	entry viewEntry
	chunk bytes.Buffer
	regen bool // render the whole view again from the archive
}

// ViewPath is the host path of a conversation's view.
func (a *Archive) ViewPath(ws, channel, conversation string) (string, error) {
	if err := checkWorkspaceID(ws); err != nil {
		return "", err
	}
	s, err := Stem(channel, conversation)
	if err != nil {
		return "", err
	}
	return filepath.Join(a.home.Workspace(ws), ViewsDir, s+viewExt), nil
}

// RebuildViews brings the workspace's conversation views up to date:
// conversations/<channel>--<conversation>.md, one readable Markdown
// transcript per conversation, built from the archive and never read back
// as a source of truth. Only complete lines the views have not seen are
// read (the byte offset reached in each archive file is kept in a small
// state file written atomically). With full, or when the state is missing,
// every view is rendered from the start. Either way the bytes of a view are
// the same: a view is a pure function of the archive lines before the
// offsets. The archive itself is only read.
func (a *Archive) RebuildViews(ctx context.Context, ws string, full bool) error {
	if err := checkWorkspaceID(ws); err != nil {
		return err
	}
	a.viewsMu.Lock()
	defer a.viewsMu.Unlock()
	wsDir := a.home.Workspace(ws)
	if _, err := os.Stat(wsDir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return desk.Errorf(desk.ENOTFOUND, "workspace %s has no directory", ws)
		}
		return err
	}
	root, err := os.OpenRoot(wsDir)
	if err != nil {
		return err
	}
	defer root.Close()

	st := &viewState{}
	if !full {
		if b, err := root.ReadFile(path.Join(ViewsDir, viewsState)); err == nil {
			if json.Unmarshal(b, st) != nil || st.Version != 1 {
				a.log.Warn("conversation views: unreadable state, rebuilding", desk.LogWorkspaceID, ws)
				st = &viewState{}
			}
		}
	}
	if st.Files == nil || st.Views == nil {
		st = &viewState{Version: 1, Files: map[string]int64{}, Views: map[string]*viewEntry{}}
	}

	days, err := a.Days(ctx, ws)
	if err != nil {
		return err
	}
	archiveDir := a.Dir(ws)
	pending := map[string]*viewUpdate{}
	update := func(name string, e *Envelope) *viewUpdate {
		u := pending[name]
		if u == nil {
			u = &viewUpdate{}
			if old := st.Views[name]; old != nil {
				u.entry = *old
			} else {
				u.entry = viewEntry{Channel: e.Channel, Conversation: e.ConversationID}
				renderHeader(&u.chunk, e.Channel, e.ConversationID)
			}
			pending[name] = u
		}
		return u
	}
	for _, day := range days {
		names, err := archiveFiles(filepath.Join(archiveDir, filepath.FromSlash(dayRel(day))))
		if err != nil {
			return err
		}
		for _, name := range names {
			rel := path.Join(dayRel(day), name)
			abs := filepath.Join(archiveDir, filepath.FromSlash(rel))
			fi, err := os.Stat(abs)
			if err != nil {
				return err
			}
			off := st.Files[rel]
			if fi.Size() == off {
				continue
			}
			reset := false
			if fi.Size() < off {
				// Archive files never shrink; if one did, someone edited
				// it by hand. Read it again and re-render what it feeds.
				a.log.Warn("conversation views: archive file shrank", desk.LogWorkspaceID, ws, "file", rel)
				off, reset = 0, true
			}
			next, err := scanFile(ctx, abs, off, fi.Size(), func(ln *Line) error {
				e := ln.Record.Header()
				stem, _ := Stem(e.Channel, e.ConversationID)
				u := update(stem+viewExt, e)
				if reset || u.entry.LastDay > day {
					// A record for a day the view has already passed:
					// only a full render puts it in its place.
					u.regen = true
				}
				if !u.regen {
					renderRecord(&u.chunk, &u.entry.LastDay, day, ln.Record)
				}
				return nil
			}, func(Skipped) {})
			if err != nil {
				return err
			}
			st.Files[rel] = next
		}
	}
	// A view deleted or edited by hand is rendered again.
	for name, e := range st.Views {
		if pending[name] != nil {
			continue
		}
		fi, err := root.Stat(path.Join(ViewsDir, name))
		if err != nil || fi.Size() != e.Size {
			pending[name] = &viewUpdate{entry: *e, regen: true}
		}
	}
	if len(pending) == 0 && !full {
		return nil
	}
	if err := root.MkdirAll(ViewsDir, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(pending))
	for n := range pending {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		u := pending[name]
		rel := path.Join(ViewsDir, name)
		var content []byte
		if !u.regen && st.Views[name] != nil {
			old, err := root.ReadFile(rel)
			if err != nil || int64(len(old)) != u.entry.Size {
				u.regen = true
			} else {
				content = append(old, u.chunk.Bytes()...)
			}
		} else if !u.regen {
			content = u.chunk.Bytes()
		}
		if u.regen {
			var b bytes.Buffer
			last, err := a.renderView(ctx, archiveDir, st, name, u.entry.Channel, u.entry.Conversation, &b)
			if err != nil {
				return err
			}
			content, u.entry.LastDay = b.Bytes(), last
		}
		if err := writeAtomic(root, rel, content); err != nil {
			return fmt.Errorf("write view %s: %w", name, err)
		}
		u.entry.Size = int64(len(content))
		e := u.entry
		st.Views[name] = &e
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return writeAtomic(root, path.Join(ViewsDir, viewsState), b)
}

// renderView renders one whole view from the archive files named after it,
// up to the offsets in st.
func (a *Archive) renderView(ctx context.Context, archiveDir string, st *viewState, name, channel, conversation string, b *bytes.Buffer) (string, error) {
	file := strings.TrimSuffix(name, viewExt) + ext
	var rels []string
	for rel := range st.Files {
		if path.Base(rel) == file {
			rels = append(rels, rel)
		}
	}
	sort.Strings(rels) // YYYY/MM/DD/name sorts by day
	renderHeader(b, channel, conversation)
	last := ""
	for _, rel := range rels {
		day := strings.ReplaceAll(path.Dir(rel), "/", "-")
		_, err := scanFile(ctx, filepath.Join(archiveDir, filepath.FromSlash(rel)), 0, st.Files[rel], func(ln *Line) error {
			e := ln.Record.Header()
			if e.Channel == channel && e.ConversationID == conversation {
				renderRecord(b, &last, day, ln.Record)
			}
			return nil
		}, func(Skipped) {})
		if err != nil {
			return "", err
		}
	}
	return last, nil
}

func writeAtomic(root *os.Root, rel string, content []byte) error {
	f, err := atomicfile.Create(root, rel)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(content); err != nil {
		return err
	}
	return f.Commit()
}

func renderHeader(b *bytes.Buffer, channel, conversation string) {
	fmt.Fprintf(b, "# %s · %s\n\n", oneLine(channel), oneLine(conversation))
	b.WriteString("_A readable view of this conversation, rebuilt by desk from `.system/archive`. " +
		"It is never the source of truth: edits are overwritten, and it is safe to delete._\n")
}

func renderRecord(b *bytes.Buffer, lastDay *string, day string, r Record) {
	if day != *lastDay {
		fmt.Fprintf(b, "\n## %s\n", day)
		*lastDay = day
	}
	at := r.Header().At.Format(time.TimeOnly)
	switch v := r.(type) {
	case *MessageInbound:
		who := firstNonEmpty(v.SenderName, v.SenderID, "user")
		fmt.Fprintf(b, "\n**%s** · %s\n\n", oneLine(who), at)
		if v.ReplyToText != "" {
			quote(b, "in reply to: "+v.ReplyToText)
			b.WriteByte('\n')
		}
		body(b, v.Text)
		if len(v.Attachments) > 0 {
			b.WriteByte('\n')
		}
		for _, at := range v.Attachments {
			fmt.Fprintf(b, "- attachment: %s (%s)\n", oneLine(firstNonEmpty(at.Name, at.Path, at.Token, "unnamed")), oneLine(at.Kind))
		}
	case *MessageOutboundRuntime:
		fmt.Fprintf(b, "\n**assistant** · %s", at)
		if v.Status != "completed" {
			fmt.Fprintf(b, " · %s", v.Status)
		}
		b.WriteString("\n\n")
		if v.Reply != "" || v.Error == "" {
			body(b, v.Reply)
		}
		if v.Error != "" {
			quote(b, "error: "+v.Error)
		}
	case *MessageOutboundChannel:
		fmt.Fprintf(b, "\n**sent to %s** · %s · %s\n\n", oneLine(v.Channel), at, v.EnvelopeType)
		body(b, v.Text)
	default:
		fmt.Fprintf(b, "\n_%s · %s_\n", at, oneLine(systemLine(r)))
	}
}

func systemLine(r Record) string {
	switch v := r.(type) {
	case *RuntimeProgress:
		return "progress: " + v.Text
	case *ApprovalRequested:
		s := "approval requested for " + v.Tool
		if v.Summary != "" {
			s += ": " + v.Summary
		}
		return s
	case *ApprovalResolved:
		s := "approval " + v.ApprovalID + " resolved: " + v.Decision
		if v.Reason != "" {
			s += " (" + v.Reason + ")"
		}
		return s
	case *UserInputRequested:
		return "asked the user: " + strings.Join(v.Questions, " / ")
	case *UserInputSubmitted:
		return "user answered: " + v.Answer
	case *TurnFailed:
		return "turn failed: " + v.Error
	case *TurnInterrupted:
		return "turn interrupted: " + v.Reason
	case *RoutineStarted:
		return "routine started: " + firstNonEmpty(v.Name, v.RoutineID)
	case *RoutineProgress:
		return "routine " + firstNonEmpty(v.Name, v.RoutineID) + ": " + v.Progress
	case *RoutineFinished:
		return "routine " + firstNonEmpty(v.Name, v.RoutineID) + " " + v.Status
	}
	return r.EventType()
}

func body(b *bytes.Buffer, s string) {
	if s == "" {
		b.WriteString("_(no text)_\n")
		return
	}
	b.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		b.WriteByte('\n')
	}
}

func quote(b *bytes.Buffer, s string) {
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("> ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// viewLoop brings the views of workspaces up to date every ViewsInterval,
// until Close: those with new records, and those whose conversations/
// changed on disk since the loop last saw it (a deleted directory or view),
// so a quiet workspace gets a deleted view back too.
func (a *Archive) viewLoop() {
	defer a.wg.Done()
	ctx := a.bg
	t := time.NewTicker(a.opt.ViewsInterval)
	defer t.Stop()
	seen := map[string]time.Time{} // workspace → conversations/ mtime after its last update
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
		a.mu.Lock()
		dirty := a.dirty
		a.dirty = map[string]bool{}
		a.mu.Unlock()
		a.changedViews(seen, dirty)
		for ws := range dirty {
			// The time is taken before the rebuild: a view deleted while
			// the rebuild runs (after it checked the views on disk) changes
			// conversations/ as the rebuild's own writes do, so either way
			// the next tick looks again, and a rebuild that finds nothing
			// to do writes nothing and settles the time.
			before := a.viewsModTime(ws)
			if err := a.RebuildViews(ctx, ws, false); err != nil {
				if ctx.Err() == nil {
					a.log.Warn("conversation views", desk.LogWorkspaceID, ws, desk.LogErr, err)
				}
				delete(seen, ws) // try again next time
				continue
			}
			if !before.IsZero() {
				seen[ws] = before
			} else {
				delete(seen, ws) // built just now (or deleted): look again
			}
		}
	}
}

// viewsModTime is the modification time of a workspace's conversations/
// directory, zero when there is none. Deleting or renaming a view inside
// it, or the directory itself, changes it.
func (a *Archive) viewsModTime(ws string) time.Time {
	fi, err := os.Stat(filepath.Join(a.home.Workspace(ws), ViewsDir))
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// changedViews adds to dirty every workspace with an archive whose
// conversations/ is not as the loop left it: one stat per workspace and
// tick, and a rebuild only where something changed (the first tick looks
// at every workspace once).
func (a *Archive) changedViews(seen map[string]time.Time, dirty map[string]bool) {
	ents, err := os.ReadDir(a.home.Workspaces())
	if err != nil {
		return
	}
	live := make(map[string]bool, len(ents))
	for _, e := range ents {
		ws := e.Name()
		if !e.IsDir() || checkWorkspaceID(ws) != nil {
			continue
		}
		live[ws] = true
		if dirty[ws] {
			continue
		}
		if _, err := os.Stat(a.Dir(ws)); err != nil {
			continue // no archive yet: nothing to view
		}
		if mt, ok := seen[ws]; !ok || !mt.Equal(a.viewsModTime(ws)) {
			dirty[ws] = true
		}
	}
	for ws := range seen {
		if !live[ws] {
			delete(seen, ws) // offboarded or purged
		}
	}
}
