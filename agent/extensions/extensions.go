// Package extensions discovers what a workspace's checkout offers its
// agent beyond desk's own prompt and tools: external instruction files
// (AGENTS.md and CLAUDE.md) and skills (folders holding a SKILL.md under
// .agents/skills/ or .claude/skills/).
//
// Everything is read through the execution's guest file system (an
// fsjail.Jail), never through a host path: a symbolic link that leads out
// of its mount is refused by the jail and reported, never followed. What
// is read is bounded (MaxInstructionBytes, MaxInstructionTotal,
// MaxSkillBytes); a file over the bound is cut with a note that says so.
// The files are read-only to desk: it never writes or moves them.
package extensions

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/session"
)

// Bounds of what reaches the prompt.
const (
	// MaxInstructionBytes is the most of one instruction file the prompt
	// holds; a longer file is cut at a line (or UTF-8) boundary below it.
	MaxInstructionBytes = 32 << 10
	// MaxInstructionTotal bounds all instruction files of a turn together;
	// a file past it is cut to what is left (or left out when nothing is).
	MaxInstructionTotal = 64 << 10
	// MaxSkillBytes bounds a loaded skill's SKILL.md in the prompt.
	MaxSkillBytes = 32 << 10
	// maxDigestBytes bounds how much of a file is hashed: a digest covers
	// the whole file up to this size (bigger files are refused, since
	// hashing gigabytes at every turn is no way to read instructions).
	maxDigestBytes = 16 << 20
)

// InstructionNames are the instruction files looked for in each root, in
// the order they enter the prompt.
var InstructionNames = []string{"AGENTS.md", "CLAUDE.md"}

// SkillDirs are the folders of a root whose subfolders are skills, in the
// order they are searched.
var SkillDirs = []string{".agents/skills", ".claude/skills"}

// Roots are the guest directories searched, in order: the checkout
// (/workspace), then the workspace's primary root when it has one that
// differs. A later root's files come after an earlier one's in the
// prompt, so the more specific directory has the last word.
func Roots(w *desk.Workspace) []string {
	roots := []string{"/workspace"}
	if p := session.PrimaryRoot(w); p != "" && p != "/workspace" {
		roots = append(roots, p)
	}
	return roots
}

// Instruction is one discovered external instruction file (see
// desk.Instruction, where the context view the doors show finds it).
type Instruction = desk.Instruction

// ReadInstructions finds and reads the instruction files of roots, in
// order: for each root, AGENTS.md then CLAUDE.md. A file that does not
// exist is not listed; one that cannot be read (a link out of its mount,
// a directory) is listed with a note and not included; a file whose
// content repeats an earlier one's (CLAUDE.md linked to AGENTS.md) is
// listed and left out. enabled false lists them without including any.
func ReadInstructions(j *fsjail.Jail, roots []string, enabled bool) []Instruction {
	var out []Instruction
	seen := map[string]bool{}
	left := MaxInstructionTotal
	for _, root := range roots {
		for _, name := range InstructionNames {
			p := path.Join(root, name)
			if seen[p] {
				continue
			}
			seen[p] = true
			in, ok := readInstruction(j, p)
			if !ok {
				continue
			}
			if in.Note == "" {
				for _, prev := range out {
					if prev.Digest == in.Digest {
						in.Note = "same content as " + prev.Path + "; included once"
						break
					}
				}
			}
			switch {
			case in.Note != "":
			case !enabled:
				in.Note = "external instructions are off for this workspace (external_instructions: false)"
			default:
				bound := min(MaxInstructionBytes, left)
				if bound <= 0 {
					in.Note = "left out: the instruction files before it used the whole bound of " + kib(MaxInstructionTotal)
					break
				}
				if len(in.Text) > bound || in.Truncated {
					in.Text = cut(in.Text, bound)
					in.Truncated = true
					in.Note = "cut: the file has " + itoa(in.Size) + " bytes; the prompt holds the first " + itoa(int64(len(in.Text))) +
						" (bounds: " + kib(MaxInstructionBytes) + " a file, " + kib(MaxInstructionTotal) + " in all); read the rest with read_file"
				}
				in.Included, in.IncludedBytes = true, len(in.Text)
				left -= len(in.Text)
			}
			if !in.Included {
				in.Text = ""
			}
			out = append(out, in)
		}
	}
	return out
}

// readInstruction reads one instruction file: its digest over the whole
// file and at most MaxInstructionBytes+1 of its text. ok is false when
// there is no such file.
func readInstruction(j *fsjail.Jail, p string) (Instruction, bool) {
	in := Instruction{Path: p}
	st, err := j.Stat(p)
	switch {
	case desk.IsCode(err, desk.ENOTFOUND):
		return in, false
	case err != nil:
		in.Note = "not read: " + desk.ErrorMessage(err)
		return in, true
	case st.Type != fsjail.TypeFile:
		in.Note = "not read: it is a directory"
		return in, true
	}
	text, digest, size, err := readBounded(j, p, MaxInstructionBytes+1)
	if err != nil {
		in.Note = "not read: " + desk.ErrorMessage(err)
		return in, true
	}
	in.Digest, in.Size, in.Text = digest, size, text
	in.Truncated = size > int64(len(text))
	return in, true
}

// readBounded reads the first keep bytes of a guest file and hashes all
// of it (up to maxDigestBytes).
func readBounded(j *fsjail.Jail, p string, keep int) (text, digest string, size int64, err error) {
	f, err := j.Open(p)
	if err != nil {
		return "", "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	var head bytes.Buffer
	n, err := io.Copy(io.MultiWriter(h, &capped{w: &head, left: keep}), io.LimitReader(f, maxDigestBytes+1))
	if err != nil {
		// The error may hold the host path (os.Root names files by it).
		return "", "", 0, desk.Errorf(desk.EINTERNAL, "%s could not be read", p)
	}
	if n > maxDigestBytes {
		return "", "", 0, desk.Errorf(desk.ETOOLARGE, "%s is larger than %s", p, kib(maxDigestBytes))
	}
	return head.String(), digestOf(h), n, nil
}

func digestOf(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// capped writes the first left bytes to w and swallows the rest.
type capped struct {
	w    io.Writer
	left int
}

func (c *capped) Write(b []byte) (int, error) {
	if c.left > 0 {
		k := min(len(b), c.left)
		c.w.Write(b[:k])
		c.left -= k
	}
	return len(b), nil
}

// cut shortens s to at most n bytes, at the last line break in its second
// half when there is one, else at a UTF-8 boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	if i := strings.LastIndexByte(s, '\n'); i >= n/2 {
		return s[:i+1]
	}
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

func kib(n int) string { return strconv.Itoa(n>>10) + " KiB" }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
