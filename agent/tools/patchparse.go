package tools

import (
	"fmt"
	"strings"
)

// The Codex patch format (codex-rs/apply-patch), parsed as its Lark
// grammar has it:
//
//	start:        begin_patch hunk+ end_patch
//	begin_patch:  "*** Begin Patch" LF
//	end_patch:    "*** End Patch" LF?
//	hunk:         add_hunk | delete_hunk | update_hunk
//	add_hunk:     "*** Add File: " filename LF add_line+
//	delete_hunk:  "*** Delete File: " filename LF
//	update_hunk:  "*** Update File: " filename LF change_move? change?
//	change_move:  "*** Move to: " filename LF
//	change:       (change_context | change_line)+ eof_line?
//	change_context: ("@@" | "@@ " /(.+)/) LF
//	change_line:  ("+" | "-" | " ") /(.+)/ LF
//	eof_line:     "*** End of File" LF
//
// with Codex's leniencies: the patch may be surrounded by blank lines,
// the first chunk of an update may omit its "@@" line, and an empty line
// inside a chunk is an empty context line.

const (
	patchBegin    = "*** Begin Patch"
	patchEnd      = "*** End Patch"
	patchAdd      = "*** Add File: "
	patchDelete   = "*** Delete File: "
	patchUpdate   = "*** Update File: "
	patchMove     = "*** Move to: "
	patchEOF      = "*** End of File"
	patchContext  = "@@ "
	patchContext0 = "@@"
)

// Kinds of file change.
const (
	changeAdd    = "add"
	changeUpdate = "update"
	changeDelete = "delete"
	changeMove   = "move"
)

// patchOp is one file operation of a patch.
type patchOp struct {
	Kind   string // add, update, delete
	Path   string // as written in the patch
	MoveTo string // update only: the new path, or ""
	Lines  []string
	Chunks []patchChunk // update only
	line   int          // 1-based line of the header, for messages
}

// patchChunk is one "@@" hunk of an update.
type patchChunk struct {
	// Context is the text after "@@ ": a line to find first; the chunk's
	// old lines are looked for after it.
	Context  string
	Old, New []string
	// EOF anchors the chunk at the end of the file.
	EOF  bool
	line int
}

// parsePatch parses a whole patch or says which line is wrong.
func parsePatch(text string) ([]patchOp, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	// Leniency: blank lines around the patch.
	first, last := 0, len(lines)-1
	for first <= last && strings.TrimSpace(lines[first]) == "" {
		first++
	}
	for last >= first && strings.TrimSpace(lines[last]) == "" {
		last--
	}
	if first > last || strings.TrimSpace(lines[first]) != patchBegin {
		return nil, fmt.Errorf("the first line of the patch must be %q", patchBegin)
	}
	if strings.TrimSpace(lines[last]) != patchEnd {
		return nil, fmt.Errorf("the last line of the patch must be %q", patchEnd)
	}
	body := lines[first+1 : last]
	offset := first + 2 // 1-based line number of body[0]
	var ops []patchOp
	for i := 0; i < len(body); {
		ln := offset + i
		h := body[i]
		switch {
		case strings.HasPrefix(h, patchAdd):
			op := patchOp{Kind: changeAdd, Path: strings.TrimSpace(h[len(patchAdd):]), line: ln}
			i++
			for i < len(body) && strings.HasPrefix(body[i], "+") {
				op.Lines = append(op.Lines, body[i][1:])
				i++
			}
			if len(op.Lines) == 0 && (i >= len(body) || !isHeader(body[i])) {
				return nil, fmt.Errorf("line %d: every line of an added file starts with \"+\"", offset+i)
			}
			ops = append(ops, op)
		case strings.HasPrefix(h, patchDelete):
			ops = append(ops, patchOp{Kind: changeDelete, Path: strings.TrimSpace(h[len(patchDelete):]), line: ln})
			i++
		case strings.HasPrefix(h, patchUpdate):
			op := patchOp{Kind: changeUpdate, Path: strings.TrimSpace(h[len(patchUpdate):]), line: ln}
			i++
			if i < len(body) && strings.HasPrefix(body[i], patchMove) {
				op.MoveTo = strings.TrimSpace(body[i][len(patchMove):])
				i++
			}
			n, chunks, err := parseChunks(body[i:], offset+i)
			if err != nil {
				return nil, err
			}
			if len(chunks) == 0 && op.MoveTo == "" {
				return nil, fmt.Errorf("line %d: update of %s has no changes", ln, op.Path)
			}
			op.Chunks = chunks
			i += n
			ops = append(ops, op)
		case strings.TrimSpace(h) == "":
			i++ // blank lines between operations
		default:
			return nil, fmt.Errorf("line %d: %q is not a file operation (%q, %q or %q)", ln, short(h), strings.TrimSpace(patchAdd), strings.TrimSpace(patchUpdate), strings.TrimSpace(patchDelete))
		}
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("the patch changes no file")
	}
	for _, op := range ops {
		if op.Path == "" || (op.Kind == changeUpdate && op.MoveTo == "" && strings.HasPrefix(op.Path, "*** ")) {
			return nil, fmt.Errorf("line %d: the operation names no file", op.line)
		}
	}
	return ops, nil
}

func isHeader(l string) bool {
	return strings.HasPrefix(l, patchAdd) || strings.HasPrefix(l, patchDelete) || strings.HasPrefix(l, patchUpdate)
}

// parseChunks reads the chunks of an update up to the next file header,
// returning how many lines it used.
func parseChunks(lines []string, offset int) (int, []patchChunk, error) {
	var chunks []patchChunk
	var cur *patchChunk
	i := 0
	for ; i < len(lines); i++ {
		l := lines[i]
		ln := offset + i
		switch {
		case isHeader(l):
			return i, finish(chunks, cur), nil
		case l == patchContext0 || strings.HasPrefix(l, patchContext):
			chunks = finish(chunks, cur)
			cur = &patchChunk{line: ln}
			if strings.HasPrefix(l, patchContext) {
				cur.Context = l[len(patchContext):]
			}
		case strings.TrimSpace(l) == patchEOF:
			if cur == nil || len(cur.Old)+len(cur.New) == 0 {
				return 0, nil, fmt.Errorf("line %d: %q ends no chunk", ln, patchEOF)
			}
			cur.EOF = true
			chunks = finish(chunks, cur)
			cur = nil
		default:
			if cur == nil {
				if len(chunks) > 0 {
					return 0, nil, fmt.Errorf("line %d: %q follows %q; a new chunk starts with \"@@\"", ln, short(l), patchEOF)
				}
				// Leniency: the first chunk may omit its "@@".
				cur = &patchChunk{line: ln}
			}
			switch {
			case l == "":
				cur.Old, cur.New = append(cur.Old, ""), append(cur.New, "")
			case l[0] == ' ':
				cur.Old, cur.New = append(cur.Old, l[1:]), append(cur.New, l[1:])
			case l[0] == '-':
				cur.Old = append(cur.Old, l[1:])
			case l[0] == '+':
				cur.New = append(cur.New, l[1:])
			default:
				return 0, nil, fmt.Errorf("line %d: %q: a chunk line starts with \" \" (context), \"-\" (removed) or \"+\" (added)", ln, short(l))
			}
		}
	}
	return i, finish(chunks, cur), nil
}

func finish(chunks []patchChunk, cur *patchChunk) []patchChunk {
	if cur == nil {
		return chunks
	}
	return append(chunks, *cur)
}

func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// applyChunks applies the chunks of an update to a file's text, or says
// which chunk does not match. The result ends with a newline, as Codex's
// does.
func applyChunks(text, name string, chunks []patchChunk) (string, error) {
	lines := strings.Split(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // the final newline
	}
	type repl struct {
		start, n int
		with     []string
	}
	var rs []repl
	at := 0
	for _, c := range chunks {
		if c.Context != "" {
			i := seekLines(lines, []string{c.Context}, at, false)
			if i < 0 {
				return "", fmt.Errorf("the chunk at line %d: its context line %q is not in %s (after line %d)", c.line, short(c.Context), name, at)
			}
			at = i + 1
		}
		if len(c.Old) == 0 {
			// Pure addition: after the context line when there is one
			// (Codex adds at the end of the file either way), else at
			// the end.
			pos := len(lines)
			if c.Context != "" {
				pos = at
			}
			rs = append(rs, repl{pos, 0, c.New})
			continue
		}
		old, nw := c.Old, c.New
		i := seekLines(lines, old, at, c.EOF)
		if i < 0 && old[len(old)-1] == "" {
			// The chunk's last line is the file's final newline.
			old = old[:len(old)-1]
			if len(nw) > 0 && nw[len(nw)-1] == "" {
				nw = nw[:len(nw)-1]
			}
			i = seekLines(lines, old, at, c.EOF)
		}
		if i < 0 {
			return "", fmt.Errorf("the chunk at line %d does not match %s: its lines starting %q are not there (read the file and copy them exactly)", c.line, name, short(c.Old[0]))
		}
		rs = append(rs, repl{i, len(old), nw})
		at = i + len(old)
	}
	// Apply from the end so earlier positions stay valid.
	for k := len(rs) - 1; k >= 0; k-- {
		r := rs[k]
		tail := append([]string{}, lines[r.start+r.n:]...)
		lines = append(append(lines[:r.start], r.with...), tail...)
	}
	if len(lines) == 0 {
		return "", nil
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// seekLines finds pattern in lines at or after start (from the end when
// eof is set), exactly first, then ignoring trailing white space, then
// ignoring surrounding white space, then with typographic punctuation
// folded to ASCII: the same ladder Codex climbs. -1 when it is not there.
func seekLines(lines, pattern []string, start int, eof bool) int {
	if len(pattern) == 0 {
		return start
	}
	if len(pattern) > len(lines) {
		return -1
	}
	from := start
	if eof {
		from = len(lines) - len(pattern)
		if from < start {
			return -1
		}
	}
	for _, norm := range []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.TrimRight(s, " \t") },
		strings.TrimSpace,
		func(s string) string { return punct.Replace(strings.TrimSpace(s)) },
	} {
		for i := from; i+len(pattern) <= len(lines); i++ {
			ok := true
			for j, p := range pattern {
				if norm(lines[i+j]) != norm(p) {
					ok = false
					break
				}
			}
			if ok {
				return i
			}
		}
	}
	return -1
}

var punct = strings.NewReplacer(
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-", "\u2212", "-",
	"\u2018", "'", "\u2019", "'", "\u201A", "'", "\u201B", "'",
	"\u201C", "\"", "\u201D", "\"", "\u201E", "\"", "\u201F", "\"",
	"\u00A0", " ", "\u2002", " ", "\u2003", " ", "\u2009", " ", "\u202F", " ",
)
