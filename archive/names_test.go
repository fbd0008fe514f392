package archive

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestStemRule(t *testing.T) {
	for _, c := range []struct{ ch, conv, want string }{
		{"feishu", "oc_8f3a", "feishu--oc_8f3a"},
		{"feishu-bot", "a-b--c", "feishu-bot--a-b--c"}, // single '-' kept; the conversation may hold "--"
		{"a--b", "x", "a%2D%2Db--x"},                   // "--" in the channel is encoded
		{"a-", "b", "a%2D--b"},                         // a trailing '-' too, so ...
		{"a", "-b", "a---b"},                           // ... this one stays distinct
		{".hidden", ".x", "%2Ehidden--%2Ex"},           // leading '.'
		{"..", "..", "%2E.--%2E."},
		{"a/b", "../x", "a%2Fb--%2E.%2Fx"},
		{"s p", "飞书", "s%20p--%E9%A3%9E%E4%B9%A6"},
		{"%", "~", "%25--%7E"},
	} {
		got, err := Stem(c.ch, c.conv)
		if err != nil || got != c.want {
			t.Errorf("Stem(%q, %q) = %q, %v; want %q", c.ch, c.conv, got, err, c.want)
			continue
		}
		ch, conv, err := DecodeName(got + ".ndjson")
		if err != nil || ch != c.ch || conv != c.conv {
			t.Errorf("DecodeName(%q) = %q, %q, %v", got, ch, conv, err)
		}
	}
	for _, bad := range []string{"noseparator.ndjson", "a%2d--b.ndjson", "a%2--b", "a--b c", "--b", "a--",
		"a-%2D--c" /* not canonical: a "-" next to a "-" must be encoded */, "x~0123456789abcdef.ndjson"} {
		if ch, conv, err := DecodeName(bad); err == nil {
			t.Errorf("DecodeName(%q) = %q, %q; want an error", bad, ch, conv)
		}
	}
	if _, err := Stem("", "x"); !IsRefused(err) {
		t.Fatalf("empty channel: %v", err)
	}
	if _, err := Stem("x", ""); !IsRefused(err) {
		t.Fatalf("empty conversation: %v", err)
	}
}

// TestStemRoundTripRandom: every pair of ids maps to a distinct name that
// decodes back, for random ids over an alphabet rich in the hard cases.
func TestStemRoundTripRandom(t *testing.T) {
	alphabet := []string{"-", "-", "-", ".", ".", "a", "Z", "0", "_", "/", "%", " ", "~", "é", "飞", "\t", "\x01", "😀"}
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func() string {
		var b strings.Builder
		for n := 1 + rng.IntN(8); n > 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	seen := map[string][2]string{}
	for i := 0; i < 20000; i++ {
		ch, conv := gen(), gen()
		s, err := Stem(ch, conv)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[s]; ok && prev != [2]string{ch, conv} {
			t.Fatalf("%q and %q both map to %q", prev, [2]string{ch, conv}, s)
		}
		seen[s] = [2]string{ch, conv}
		gch, gconv, err := DecodeName(s)
		if err != nil || gch != ch || gconv != conv {
			t.Fatalf("round trip of (%q, %q) via %q gave (%q, %q, %v)", ch, conv, s, gch, gconv, err)
		}
	}
}

func TestHostileIDs(t *testing.T) {
	e := newEnv(t, Options{})
	long := strings.Repeat("x", 1000)
	longUnicode := strings.Repeat("飞", 400)
	ids := [][2]string{
		{"../x", "../../etc/passwd"},
		{"a/b", "c/d"},
		{"--", "--"},
		{"-", "-"},
		{"with space", "tab\there"},
		{"飞书", "会话 1"},
		{"ctl\x01\x1f\x7f", "nl\nx\rcr"},
		{".", ".."},
		{"..", "."},
		{"/", "/"},
		{"\\..\\", "C:\\x"},
		{long, "c"},
		{"c", long},
		{longUnicode, longUnicode},
		{"%2E", "%"},
	}
	dayDir := filepath.Join(e.a.Dir(testWS), "2026", "03", "14")
	for _, id := range ids {
		e.append(&MessageInbound{Envelope: env0(t0, id[0], id[1]), Text: "hi " + id[0]})
		p, err := e.a.Path(testWS, id[0], id[1], t0)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(p) != dayDir {
			t.Fatalf("%q: %s is not in the day directory", id, p)
		}
		name := filepath.Base(p)
		if strings.HasPrefix(name, ".") || len(name) > 255 || strings.ContainsAny(name, "/\\\x00") {
			t.Fatalf("%q: bad file name %q", id, name)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		ch, conv, err := DecodeName(name)
		if Shortened(name) {
			if len(name) > MaxStem+len(".ndjson") || err == nil {
				t.Fatalf("%q: shortened name %q (%d bytes) decoded: %v", id, name, len(name), err)
			}
		} else if err != nil || ch != id[0] || conv != id[1] {
			t.Fatalf("%q: DecodeName(%q) = %q, %q, %v", id, name, ch, conv, err)
		}
	}
	ents, _ := os.ReadDir(dayDir)
	if len(ents) != len(ids) {
		t.Fatalf("%d files for %d conversations", len(ents), len(ids))
	}
	// Nothing escaped: every file is in the day directory.
	var stray []string
	_ = filepath.WalkDir(e.home.Root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Dir(p) != dayDir {
			stray = append(stray, p)
		}
		return nil
	})
	if len(stray) > 0 {
		t.Fatalf("files outside the day directory: %v", stray)
	}
	// The records carry the exact ids, and Read finds each conversation by
	// them, shortened or not.
	for _, id := range ids {
		var got []Record
		sum, err := e.a.Read(context.Background(), testWS, Filter{Channel: id[0], Conversation: id[1]}, func(l *Line) error {
			got = append(got, l.Record)
			return nil
		})
		if err != nil || len(got) != 1 || sum.SkippedTotal != 0 {
			t.Fatalf("%q: read %d records, %+v, %v", id, len(got), sum, err)
		}
		h := got[0].Header()
		if h.Channel != id[0] || h.ConversationID != id[1] {
			t.Fatalf("record ids %q, %q; want %q", h.Channel, h.ConversationID, id)
		}
	}
	// Views use the same names, inside conversations/.
	if err := e.a.RebuildViews(context.Background(), testWS, false); err != nil {
		t.Fatal(err)
	}
	views, _ := os.ReadDir(filepath.Join(e.home.Workspace(testWS), ViewsDir))
	if len(views) != len(ids)+1 { // + the state file
		t.Fatalf("%d entries in conversations/", len(views))
	}
	for _, id := range ids {
		p, _ := e.a.ViewPath(testWS, id[0], id[1])
		if filepath.Dir(p) != filepath.Join(e.home.Workspace(testWS), ViewsDir) {
			t.Fatalf("view %s escaped", p)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
	}
}

func TestShortenedStem(t *testing.T) {
	a, b := strings.Repeat("c", 300), strings.Repeat("c", 299)+"d"
	sa, _ := Stem("ch", a)
	sb, _ := Stem("ch", b)
	if len(sa) != MaxStem || len(sb) != MaxStem || sa == sb || !Shortened(sa) {
		t.Fatalf("shortened stems %q (%d) %q (%d)", sa, len(sa), sb, len(sb))
	}
	if !strings.HasPrefix(sa, "ch--ccc") {
		t.Fatalf("prefix lost: %q", sa)
	}
	// The cut never splits an escape.
	for n := 150; n < 260; n++ {
		s, _ := Stem("ch", strings.Repeat("飞", n))
		i := strings.IndexByte(s, '~')
		if i < 0 {
			continue
		}
		if p := s[:i]; strings.HasSuffix(p, "%") || len(p) > 1 && p[len(p)-2] == '%' {
			t.Fatalf("escape split in %q", s)
		}
		if !utf8.ValidString(s) {
			t.Fatal(s)
		}
	}
}

func TestLocationDecidesDay(t *testing.T) {
	loc, err := LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := LoadLocation(""); l != time.UTC {
		t.Fatal("empty DESK_ARCHIVE_TZ is not UTC")
	}
	if _, err := LoadLocation("Mars/Olympus"); err == nil {
		t.Fatal("bad zone accepted")
	}
	e := newEnv(t, Options{Location: loc})
	at := time.Date(2026, 3, 14, 23, 30, 0, 5, time.UTC)
	e.append(&MessageInbound{Envelope: env0(at, "feishu", "oc_1"), Text: "late"})
	files := e.archiveFiles()
	if len(files) != 1 || files[0] != "2026/03/15/feishu--oc_1.ndjson" {
		t.Fatalf("files = %v, want the next day's directory", files)
	}
	ls := lines(e.readFile(files[0]))
	if !strings.Contains(string(ls[0]), `"at":"2026-03-15T07:30:00.000000005+08:00"`) {
		t.Fatalf("at not in +08:00: %s", ls[0])
	}
	r, err := ParseLine(ls[0])
	if err != nil || !r.Header().At.Equal(at) {
		t.Fatalf("at round trip: %v %v", r, err)
	}
	// The same instant in UTC stays on the 14th.
	u := newEnv(t, Options{})
	u.append(&MessageInbound{Envelope: env0(at, "feishu", "oc_1"), Text: "late"})
	if got := u.archiveFiles(); got[0] != "2026/03/14/feishu--oc_1.ndjson" {
		t.Fatalf("UTC: %v", got)
	}
	if !strings.Contains(string(u.readFile(u.archiveFiles()[0])), `"at":"2026-03-14T23:30:00.000000005Z"`) {
		t.Fatal("UTC at")
	}
	// A reader with a time filter finds it either way.
	n := 0
	if _, err := e.a.Read(context.Background(), testWS, Filter{From: at, To: at.Add(time.Nanosecond)}, func(*Line) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("filtered read: %d, %v", n, err)
	}
}
