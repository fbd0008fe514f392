package extensions

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk/fsjail"
)

// world is a guest file system with a checkout at /workspace, a primary
// root at /home/me/proj, and a secret outside both.
type world struct {
	t                      *testing.T
	checkout, root, secret string
	j                      *fsjail.Jail
}

func newWorld(t *testing.T) *world {
	t.Helper()
	base := t.TempDir()
	w := &world{t: t, checkout: filepath.Join(base, "checkout"), root: filepath.Join(base, "proj"), secret: filepath.Join(base, "secret.md")}
	for _, d := range []string{w.checkout, w.root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.write(w.secret, "SECRET outside the guest file system")
	j, err := fsjail.New([]fsjail.Mount{{Guest: "/workspace", Host: w.checkout}, {Guest: "/home/me/proj", Host: w.root}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	w.j = j
	return w
}

func (w *world) write(p, text string) {
	w.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

var roots = []string{"/workspace", "/home/me/proj"}

// TestInstructionsOrderAndRecords: checkout AGENTS.md, checkout CLAUDE.md,
// then the primary root's, each with its digest and size; a missing file
// is not listed.
func TestInstructionsOrderAndRecords(t *testing.T) {
	w := newWorld(t)
	w.write(filepath.Join(w.checkout, "CLAUDE.md"), "checkout claude")
	w.write(filepath.Join(w.checkout, "AGENTS.md"), "checkout agents")
	w.write(filepath.Join(w.root, "AGENTS.md"), "root agents")
	got := ReadInstructions(w.j, roots, true)
	want := []struct{ path, text string }{
		{"/workspace/AGENTS.md", "checkout agents"}, {"/workspace/CLAUDE.md", "checkout claude"}, {"/home/me/proj/AGENTS.md", "root agents"},
	}
	if len(got) != len(want) {
		t.Fatalf("found %+v", got)
	}
	for i, in := range got {
		if in.Path != want[i].path || in.Text != want[i].text || !in.Included || in.Digest != sum(want[i].text) ||
			in.Size != int64(len(want[i].text)) || in.IncludedBytes != len(want[i].text) || in.Truncated || in.Note != "" {
			t.Fatalf("record %d = %+v, want %s", i, in, want[i].path)
		}
	}
	// Off: listed, none included, no text.
	for _, in := range ReadInstructions(w.j, roots, false) {
		if in.Included || in.Text != "" || !strings.Contains(in.Note, "external_instructions: false") || in.Digest == "" {
			t.Fatalf("with instructions off: %+v", in)
		}
	}
}

// TestInstructionsBounded: a huge file is cut at a line below the bound
// with a note naming its size; its digest still covers the whole file;
// the total bound cuts the next file to what is left.
func TestInstructionsBounded(t *testing.T) {
	w := newWorld(t)
	line := strings.Repeat("x", 127) + "\n"
	huge := strings.Repeat(line, 800) // 102,400 bytes: a file takes exactly the per-file bound
	w.write(filepath.Join(w.checkout, "AGENTS.md"), huge)
	w.write(filepath.Join(w.checkout, "CLAUDE.md"), huge+"second")
	w.write(filepath.Join(w.root, "AGENTS.md"), "third")
	got := ReadInstructions(w.j, roots, true)
	if len(got) != 3 {
		t.Fatalf("found %+v", got)
	}
	a := got[0]
	if !a.Included || !a.Truncated || a.Size != int64(len(huge)) || a.Digest != sum(huge) || len(a.Text) > MaxInstructionBytes ||
		len(a.Text) < MaxInstructionBytes-len(line) || !strings.HasSuffix(a.Text, "\n") || a.IncludedBytes != len(a.Text) ||
		!strings.Contains(a.Note, "102400 bytes") || !strings.HasPrefix(huge, a.Text) {
		t.Fatalf("huge file: size %d included %d truncated %v note %q", a.Size, len(a.Text), a.Truncated, a.Note)
	}
	b := got[1]
	if !b.Included || !b.Truncated || len(a.Text)+len(b.Text) > MaxInstructionTotal {
		t.Fatalf("second file: %d bytes included after %d (total bound %d)", len(b.Text), len(a.Text), MaxInstructionTotal)
	}
	if c := got[2]; c.Included || c.Text != "" || !strings.Contains(c.Note, "left out") {
		t.Fatalf("third file past the total bound: %+v", c)
	}
}

// TestInstructionsNeverLeaveTheJail: a CLAUDE.md linking out of the
// checkout is listed as not read and its target never shows; one linking
// to AGENTS.md inside the checkout is included once.
func TestInstructionsNeverLeaveTheJail(t *testing.T) {
	w := newWorld(t)
	if err := os.Symlink(w.secret, filepath.Join(w.checkout, "CLAUDE.md")); err != nil {
		t.Fatal(err)
	}
	w.write(filepath.Join(w.root, "AGENTS.md"), "root agents")
	if err := os.Symlink("AGENTS.md", filepath.Join(w.root, "CLAUDE.md")); err != nil {
		t.Fatal(err)
	}
	got := ReadInstructions(w.j, roots, true)
	if len(got) != 3 {
		t.Fatalf("found %+v", got)
	}
	if out := got[0]; out.Path != "/workspace/CLAUDE.md" || out.Included || out.Text != "" || out.Digest != "" || !strings.HasPrefix(out.Note, "not read") {
		t.Fatalf("a link out: %+v", out)
	}
	if strings.Contains(got[0].Note, w.secret) {
		t.Fatalf("the note names a host path: %q", got[0].Note)
	}
	if dup := got[2]; dup.Included || !strings.Contains(dup.Note, "same content as /home/me/proj/AGENTS.md") {
		t.Fatalf("a link to AGENTS.md: %+v", dup)
	}
}

// TestSkills: skills of both folders of both roots, name and description
// from the front matter (the folder's name without one), the first of a
// name winning, bad front matter and bad names reported; a loaded skill's
// body comes without its front matter and names its files.
func TestSkills(t *testing.T) {
	w := newWorld(t)
	w.write(filepath.Join(w.checkout, ".agents/skills/pdf/SKILL.md"), "---\nname: pdf-tools\ndescription: >\n  Fill and merge PDF forms.\nallowed-tools: [exec_command]\n---\n\n# PDF\nRun scripts/fill.py.\n")
	w.write(filepath.Join(w.checkout, ".agents/skills/pdf/scripts/fill.py"), "print('fill')\n")
	w.write(filepath.Join(w.checkout, ".agents/skills/pdf/reference/forms.md"), "forms\n")
	w.write(filepath.Join(w.checkout, ".claude/skills/plain/SKILL.md"), "# no front matter\nJust do it.\n")
	w.write(filepath.Join(w.checkout, ".claude/skills/again/SKILL.md"), "---\nname: pdf-tools\ndescription: a second one\n---\nbody\n")
	w.write(filepath.Join(w.checkout, ".claude/skills/broken/SKILL.md"), "---\nname: [unclosed\n---\nbody\n")
	w.write(filepath.Join(w.root, ".agents/skills/bad-name/SKILL.md"), "---\nname: has space\n---\n")
	w.write(filepath.Join(w.checkout, ".agents/skills/empty/notes.md"), "no SKILL.md here")
	got := FindSkills(w.j, roots)
	byPath := map[string]Skill{}
	for _, s := range got {
		byPath[s.Path] = s
	}
	if len(got) != 5 {
		t.Fatalf("found %+v", got)
	}
	if s := got[0]; s.Name != "pdf-tools" || s.Description != "Fill and merge PDF forms." || s.Path != "/workspace/.agents/skills/pdf/SKILL.md" || s.Problem != "" {
		t.Fatalf("first skill %+v", s)
	}
	if s := byPath["/workspace/.claude/skills/plain/SKILL.md"]; s.Name != "plain" || s.Description != "" || s.Problem != "" {
		t.Fatalf("a skill without front matter: %+v", s)
	}
	if s := byPath["/workspace/.claude/skills/again/SKILL.md"]; !strings.Contains(s.Problem, "taken by /workspace/.agents/skills/pdf/SKILL.md") {
		t.Fatalf("a second pdf-tools: %+v", s)
	}
	if s := byPath["/workspace/.claude/skills/broken/SKILL.md"]; !strings.Contains(s.Problem, "not valid YAML") {
		t.Fatalf("broken front matter: %+v", s)
	}
	if s := byPath["/home/me/proj/.agents/skills/bad-name/SKILL.md"]; !strings.Contains(s.Problem, "is not valid") {
		t.Fatalf("a bad name: %+v", s)
	}
	txt, err := ReadSkill(w.j, got[0])
	if err != nil {
		t.Fatal(err)
	}
	if txt.Body != "# PDF\nRun scripts/fill.py.\n" || txt.Truncated || txt.Digest == "" {
		t.Fatalf("body %q", txt.Body)
	}
	want := []string{"/workspace/.agents/skills/pdf/reference/forms.md", "/workspace/.agents/skills/pdf/scripts/fill.py"}
	if strings.Join(txt.Files, ",") != strings.Join(want, ",") || txt.More != 0 {
		t.Fatalf("files %v", txt.Files)
	}
}
