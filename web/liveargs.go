package web

import (
	"encoding/json"
	"html/template"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// What a step shows while it streams: its text as Markdown rendered so far
// and each tool call's arguments as the model writes them (the path and a
// growing preview of write_file, a live diff of apply_patch, the command
// line of exec_command). Everything the model wrote is attacker-controlled:
// it reaches the page only as escaped text in html/template or through
// goldmark (which omits raw HTML), and only its bounded tail is sent.

const (
	// maxLiveArgs bounds the arguments a page's stream keeps per call;
	// beyond it the preview stops growing and says how much came.
	maxLiveArgs = 512 << 10
	// previewLines and previewLine bound what one preview shows: the last
	// lines, each clipped, so a huge single line cannot freeze the page.
	previewLines = 40
	previewLine  = 400
	// argsEvery is how often a call's preview is redrawn at most; the
	// span that replaces the stream shows the complete arguments.
	argsEvery = 150 * time.Millisecond
	// maxLiveTail is the most streamed Markdown re-rendered on each delta:
	// text before the last paragraph break is rendered once and appended.
	maxLiveTail = 8 << 10
)

// liveCall is one tool call being written in a streaming step.
type liveCall struct {
	ID    string // element id: live-<exe>-call-<index>
	Tool  string
	args  strings.Builder
	total int // bytes of arguments received, kept or not
	drawn time.Time
}

func (c *liveCall) add(delta string) {
	c.total += len(delta)
	if room := maxLiveArgs - c.args.Len(); room > 0 {
		if len(delta) > room {
			delta = delta[:room]
		}
		c.args.WriteString(delta)
	}
}

// liveCallView is what the live-call template shows.
type liveCallView struct {
	ID      string
	Tool    string
	Target  string     // the path or command line
	Lines   []diffLine // the preview's last lines (a patch's with classes)
	Note    string     // how much has come so far
	Pending bool       // nothing to show yet
	Out     string     // a runtime call's command: its output pane
	OOB     bool
}

func (c *liveCall) view() *liveCallView {
	args := c.args.String()
	v := &liveCallView{ID: c.ID, Tool: c.Tool}
	switch c.Tool {
	case "write_file":
		v.Target, _ = partialString(args, "path")
		if raw, ok := partialRaw(args, "content"); ok {
			// Only the tail the preview shows is decoded; the lines are
			// counted on the raw text (no copy of a large file per draw).
			n, start := rawTail(raw)
			content, _ := unquote(raw[start:])
			v.Lines = tailLines(content, "")
			v.Note = plural(n+1, "line") + " so far"
		}
	case "apply_patch":
		if patch, ok := partialString(args, "patch"); ok {
			v.Lines = tailLines(patch, "patch")
			files := 0
			for _, l := range strings.Split(patch, "\n") {
				if strings.HasPrefix(l, "*** Add File:") || strings.HasPrefix(l, "*** Update File:") || strings.HasPrefix(l, "*** Delete File:") {
					files++
					if v.Target == "" {
						v.Target = strings.TrimSpace(l[strings.Index(l, ":")+1:])
					}
				}
			}
			if files > 1 {
				v.Target += " and " + plural(files-1, "more file")
			}
		}
	case "exec_command":
		v.Target, _ = partialString(args, "command")
	default:
		for _, k := range []string{"path", "command", "url", "query", "name"} {
			if s, ok := partialString(args, k); ok && s != "" {
				v.Target = s
				break
			}
		}
		if v.Target == "" && args != "" {
			v.Lines = tailLines(args, "")
		}
	}
	v.Target = clipLine(v.Target)
	if c.total > c.args.Len() {
		v.Note = "preview stopped at " + kib(c.args.Len()) + "; " + kib(c.total) + " so far"
	}
	v.Pending = v.Target == "" && len(v.Lines) == 0
	return v
}

func kib(n int) string { return plural((n+1023)>>10, "KiB") }

func plural(n int, what string) string {
	s := strconv.Itoa(n) + " " + what
	if n != 1 && !strings.HasSuffix(what, "KiB") {
		s += "s"
	}
	return s
}

// tailLines is the last previewLines lines of text, each clipped; as
// "patch" each line is classed as a diff line.
func tailLines(text, as string) []diffLine {
	lines := strings.Split(text, "\n")
	if len(lines) > previewLines {
		lines = lines[len(lines)-previewLines:]
	}
	out := make([]diffLine, 0, len(lines))
	for _, l := range lines {
		class := "ctx"
		if as == "patch" {
			switch {
			case strings.HasPrefix(l, "*** Begin Patch"), strings.HasPrefix(l, "*** End Patch"):
				continue
			case strings.HasPrefix(l, "***"):
				class = "file"
			case strings.HasPrefix(l, "@@"):
				class = "hunk"
			case strings.HasPrefix(l, "+"):
				class = "add"
			case strings.HasPrefix(l, "-"):
				class = "del"
			}
		}
		out = append(out, diffLine{Class: class, Text: clipLine(l)})
	}
	return out
}

// clipLine cuts a line to previewLine bytes on a character boundary.
func clipLine(s string) string {
	if len(s) <= previewLine {
		return s
	}
	n := previewLine
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// partialString reads the string value of key at the top level of a JSON
// object that may still be arriving: a value cut short is returned as far
// as it came (an escape cut in half dropped). ok is false while the key
// has not come, or its value is not a string.
func partialString(js, key string) (string, bool) {
	raw, ok := partialRaw(js, key)
	if !ok {
		return "", false
	}
	return unquote(raw)
}

// maxTailBytes bounds the raw text decoded for a preview.
const maxTailBytes = previewLines * previewLine

// rawTail counts the line breaks of a raw JSON string body and finds where
// its last previewLines lines start (at most maxTailBytes from its end,
// moved past any escape the cut would split).
func rawTail(raw string) (breaks, start int) {
	var ring [previewLines]int // where the lines after the latest breaks start
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 < len(raw) && raw[i+1] == 'n' {
			ring[breaks%previewLines] = i + 2
			breaks++
		}
		i++ // the escaped character
	}
	if breaks >= previewLines {
		start = ring[breaks%previewLines]
	}
	if len(raw)-start > maxTailBytes {
		start = len(raw) - maxTailBytes
		// A cut inside an escape: move past it (at most "\uXXXX").
		for k := 0; k < 6 && start < len(raw) && strings.Contains(raw[max(0, start-6):start], `\`); k++ {
			start++
		}
	}
	return breaks, start
}

// partialRaw is partialString's raw string body, undecoded.
func partialRaw(js, key string) (string, bool) {
	depth := 0
	expectKey := false
	for i := 0; i < len(js); i++ {
		switch c := js[i]; c {
		case '{', '[':
			depth++
			expectKey = c == '{' && depth == 1
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1
		case '"':
			raw, end := rawString(js, i+1)
			if depth == 1 && expectKey {
				expectKey = false
				k, _ := unquote(raw)
				j := skipSpace(js, end+1)
				if j >= len(js) || js[j] != ':' {
					return "", false
				}
				j = skipSpace(js, j+1)
				if k == key {
					if j >= len(js) || js[j] != '"' {
						return "", false
					}
					v, _ := rawString(js, j+1)
					return v, true
				}
				i = j - 1
				continue
			}
			i = end
		}
	}
	return "", false
}

// rawString is the raw text of a JSON string whose body starts at i, and
// the index of its closing quote (len(js) when it has not come yet).
func rawString(js string, i int) (string, int) {
	for j := i; j < len(js); j++ {
		switch js[j] {
		case '\\':
			j++
		case '"':
			return js[i:j], j
		}
	}
	return js[i:], len(js)
}

// unquote decodes a raw JSON string body, dropping an escape cut short.
func unquote(raw string) (string, bool) {
	if k := strings.LastIndexByte(raw, '\\'); k >= 0 && len(raw)-k < 6 {
		// A trailing "\", "\u12" or the like: the rest is still coming.
		if bs := k + 1 - len(strings.TrimRight(raw[:k+1], `\`)); bs%2 == 1 && (k == len(raw)-1 || raw[k+1] == 'u') {
			raw = raw[:k]
		}
	}
	var s string
	if json.Unmarshal([]byte(`"`+raw+`"`), &s) != nil {
		return raw, true
	}
	return s, true
}

func skipSpace(js string, i int) int {
	for i < len(js) && (js[i] == ' ' || js[i] == '\n' || js[i] == '\t' || js[i] == '\r') {
		i++
	}
	return i
}

// liveText is one execution's streamed text, rendered as Markdown in two
// parts: done (whole paragraphs, appended once) and the tail (re-rendered
// on each delta).
type liveText struct {
	text strings.Builder
	done int // bytes of text already appended as done
}

// liveMD is what the live-md template sends.
type liveMD struct {
	Exe  string
	Done template.HTML // to append to the done part, if any
	Tail template.HTML
}

func (t *liveText) add(exe, delta string) liveMD {
	t.text.WriteString(delta)
	all := t.text.String()
	rest := all[t.done:]
	cut := stableCut(rest)
	out := liveMD{Exe: exe}
	if cut > 0 {
		out.Done = markdown(rest[:cut])
		t.done += cut
		rest = rest[cut:]
	}
	out.Tail = markdown(rest)
	return out
}

// stableCut is where rest can be split so that what comes before renders
// the same whatever follows: after the last paragraph break outside a code
// fence. A tail longer than maxLiveTail is cut at its last line break (or
// anywhere), so a reply without breaks is not re-rendered whole each time.
func stableCut(rest string) int {
	cut, fenced := 0, false
	for i := 0; i < len(rest); {
		j := strings.IndexByte(rest[i:], '\n')
		if j < 0 {
			break
		}
		line := rest[i : i+j]
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
		}
		i += j + 1
		if !fenced && strings.TrimSpace(line) == "" && i < len(rest) {
			cut = i
		}
	}
	if len(rest)-cut > maxLiveTail {
		if k := strings.LastIndexByte(rest, '\n'); k+1 > cut {
			cut = k + 1
		}
		if len(rest)-cut > maxLiveTail {
			cut = len(rest) - maxLiveTail/2
			for cut > 0 && !utf8.RuneStart(rest[cut]) {
				cut--
			}
		}
	}
	return cut
}
