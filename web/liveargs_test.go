package web

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

// TestPartialString: a string argument is read however far the JSON has
// come, escapes cut in half are held back, and keys inside nested values
// or other values' text are not mistaken for the top-level key.
func TestPartialString(t *testing.T) {
	full := `{"content":"say \"path\": no\\n\u00e9\nline two","nested":{"path":"/wrong"},"path":"/artifacts/a.md"}`
	var want struct{ Content, Path string }
	if err := json.Unmarshal([]byte(full), &want); err != nil {
		t.Fatal(err)
	}
	for n := 0; n <= len(full); n++ {
		js := full[:n]
		if got, ok := partialString(js, "content"); ok && !strings.HasPrefix(want.Content, got) {
			t.Fatalf("content of %q = %q, not a prefix of %q", js, got, want.Content)
		}
		if got, ok := partialString(js, "path"); ok && !strings.HasPrefix(want.Path, got) {
			t.Fatalf("path of %q = %q, not a prefix of %q", js, got, want.Path)
		}
	}
	if got, _ := partialString(full, "path"); got != want.Path {
		t.Fatalf("path = %q", got)
	}
	if got, _ := partialString(full, "content"); got != want.Content {
		t.Fatalf("content = %q", got)
	}
	if _, ok := partialString(`{"path":42}`, "path"); ok {
		t.Fatal("a number read as a string")
	}
}

// TestLiveTextRendersIncrementally: streamed Markdown is rendered as it
// comes; whole paragraphs are sent once, the open one again each time;
// raw HTML never passes; a reply with no breaks re-renders a bounded tail.
func TestLiveTextRendersIncrementally(t *testing.T) {
	var lt liveText
	var done strings.Builder
	var last liveMD
	for _, d := range []string{"Hello **bo", "ld** world\n\n", "see <script>alert(1)</script> and `co", "de`\n\n```\nx\n\ny\n", "```\n\nend"} {
		last = lt.add("exe_1", d)
		done.WriteString(string(last.Done))
	}
	all := done.String() + string(last.Tail)
	for _, want := range []string{"<strong>bold</strong>", "<code>code</code>", "<pre><code>x\n\ny\n</code></pre>", "<p>end</p>"} {
		if !strings.Contains(all, want) {
			t.Errorf("rendered %q lacks %q", all, want)
		}
	}
	if strings.Contains(all, "<script") {
		t.Fatalf("raw HTML passed: %q", all)
	}
	if string(last.Tail) != "<p>end</p>\n" {
		t.Errorf("tail = %q, want only the open paragraph", last.Tail)
	}
	var long liveText
	for range 200 {
		m := long.add("exe_2", strings.Repeat("x", 1000))
		if len(m.Tail) > 2*maxLiveTail {
			t.Fatalf("tail of %d bytes re-rendered", len(m.Tail))
		}
	}
}

// TestLiveCallPreviews: write_file shows its path and the content's last
// lines (clipped), apply_patch its diff lines, exec_command its command.
func TestLiveCallPreviews(t *testing.T) {
	c := &liveCall{Tool: "write_file"}
	c.add(`{"path":"/artifacts/big.txt","content":"` + strings.Repeat(`line\n`, 100) + strings.Repeat("y", 10000))
	v := c.view()
	if v.Target != "/artifacts/big.txt" || len(v.Lines) != previewLines || len(v.Lines[len(v.Lines)-1].Text) > previewLine+len("…") {
		t.Fatalf("write_file view: target %q, %d lines", v.Target, len(v.Lines))
	}
	if v.Note != "101 lines so far" || v.Lines[0].Text != "line" {
		t.Fatalf("write_file note %q, first preview line %q", v.Note, v.Lines[0].Text)
	}
	// Escapes decode in the tail, a literal backslash-n is no line break.
	esc := &liveCall{Tool: "write_file"}
	esc.add(`{"path":"/a","content":"a\\nb \"q\" \\\\n \u00e9\nlast`)
	if ev := esc.view(); ev.Note != "2 lines so far" || ev.Lines[0].Text != `a\nb "q" \\n é` || ev.Lines[1].Text != "last" {
		t.Fatalf("escaped content: %q %+v", ev.Note, ev.Lines)
	}
	p := &liveCall{Tool: "apply_patch"}
	p.add(`{"patch":"*** Begin Patch\n*** Update File: /w/a.go\n@@\n-old\n+new`)
	pv := p.view()
	var classes []string
	for _, l := range pv.Lines {
		classes = append(classes, l.Class)
	}
	if pv.Target != "/w/a.go" || strings.Join(classes, ",") != "file,hunk,del,add" {
		t.Fatalf("apply_patch view: %q %v", pv.Target, classes)
	}
	e := &liveCall{Tool: "exec_command"}
	e.add(`{"command":"go test ./...","cwd":"/w"}`)
	if ev := e.view(); ev.Target != "go test ./..." {
		t.Fatalf("exec_command target %q", ev.Target)
	}
	huge := &liveCall{Tool: "write_file"}
	huge.add(`{"path":"/a","content":"` + strings.Repeat("z", maxLiveArgs))
	huge.add(strings.Repeat("z", 1000))
	if hv := huge.view(); huge.args.Len() != maxLiveArgs || !strings.Contains(hv.Note, "preview stopped") {
		t.Fatalf("arguments beyond the bound: kept %d, note %q", huge.args.Len(), hv.Note)
	}
}

// TestErrKind: an error's kind is named from its words; an unknown one
// is "error".
func TestErrKind(t *testing.T) {
	for msg, want := range map[string]string{
		"context deadline exceeded":                            "timeout",
		"dial tcp 127.0.0.1:5432: connect: connection refused": "network",
		"open /x: no such file or directory":                   "not found",
		"SQLSTATE 40001":                                       "store",
		"something odd":                                        "error",
	} {
		if got := errKind(msg); got != want {
			t.Errorf("errKind(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestThreadBriefShownPlain: a handler thread's first message shows the
// objective, not the <thread …> markup, and is not labelled as the user's.
func TestThreadBriefShownPlain(t *testing.T) {
	text := "<thread id=\"thr_1\" title=\"Fix \\\"the\\\" build\" thread_group_id=\"tg_1\">\nYou own this delegated objective:\nMake go test pass.\nTwo lines.\n</thread>\n"
	v := message("ses_1", &desk.Message{Role: desk.RoleUser, Text: text}, nil)
	if v.Brief != "Make go test pass.\nTwo lines." {
		t.Fatalf("brief = %q", v.Brief)
	}
	if w := message("ses_1", &desk.Message{Role: desk.RoleUser, Text: "<thread>not a brief"}, nil); w.Brief != "" {
		t.Fatalf("a user's text read as a brief: %q", w.Brief)
	}
}

// BenchmarkLiveCallHugeArgs feeds a write_file call 4 MiB of content in
// 64-byte deltas, one huge line, drawing its preview after every delta (the
// worst case: no throttle); what is kept and drawn stays bounded.
func BenchmarkLiveCallHugeArgs(b *testing.B) {
	delta := strings.Repeat("x", 64)
	for b.Loop() {
		c := &liveCall{Tool: "write_file"}
		c.add(`{"path":"/a","content":"`)
		for range (4 << 20) / 64 / 64 {
			for range 64 {
				c.add(delta)
			}
			if v := c.view(); len(v.Lines) > previewLines {
				b.Fatal("unbounded preview")
			}
		}
		if c.args.Len() > maxLiveArgs {
			b.Fatal("unbounded arguments")
		}
	}
}

// BenchmarkLiveTextNoBreaks streams 1 MiB of Markdown without a line
// break in 64-byte deltas: each delta re-renders a bounded tail.
func BenchmarkLiveTextNoBreaks(b *testing.B) {
	delta := strings.Repeat("word ", 13)[:64]
	for b.Loop() {
		var t liveText
		for range (1 << 20) / 64 {
			if m := t.add("exe", delta); len(m.Tail) > 2*maxLiveTail {
				b.Fatal("unbounded tail")
			}
		}
	}
}
