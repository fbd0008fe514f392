package fsjail

import (
	"testing"

	"github.com/desk-runtime/desk"
)

// TestCheckName: invisible, control and text-direction characters are
// refused; everything else comes back in normal form C.
func TestCheckName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"report.md", "report.md"},
		{"cafe\u0301.txt", "caf\u00e9.txt"}, // NFD → NFC
		{"caf\u00e9.txt", "caf\u00e9.txt"},
		{"名前.txt", "名前.txt"},
		{"Å.txt", "\u00c5.txt"}, // Angstrom sign U+212B is NFC-mapped to Å
		{"emoji 🎉.png", "emoji 🎉.png"},
	} {
		got, err := CheckName(c.in)
		if err != nil || got != c.want {
			t.Errorf("CheckName(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		"invoice\u202Efdp.exe", "a\u202Ab", "a\u202Bb", "a\u202Cb", "a\u202Db",
		"a\u2066b", "a\u2067b", "a\u2068b", "a\u2069b",
		"a\u200Bb", "a\u200Cb", "a\u200Db", "a\u200Eb", "a\u200Fb",
		"a\u2060b", "\uFEFFa", "a\u00ADb", "a\u061Cb",
		"tab\tname", "new\nline", "nul\x00", "del\x7f", "c1\u0085", "c1\u009b",
		"a\u2028b", "tag\U000E0041",
	} {
		if _, err := CheckName(in); !desk.IsCode(err, desk.EINVALID) {
			t.Errorf("CheckName(%q) = %v; want invalid", in, err)
		}
	}
	if got, err := CheckPathNames("dir/cafe\u0301/x.txt"); err != nil || got != "dir/caf\u00e9/x.txt" {
		t.Errorf("CheckPathNames = %q, %v", got, err)
	}
	if _, err := CheckPathNames("ok/bad\u202E/x"); !desk.IsCode(err, desk.EINVALID) {
		t.Errorf("CheckPathNames with an override = %v", err)
	}
}
