package session

import (
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

func TestSanitizeName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"report.md", "report.md"},
		{"report", "report.md"},
		{"../../etc/passwd", "-..-etc-passwd.md"},
		{"a/b\\c.txt", "a-b-c.txt"},
		{".hidden.png", "hidden.png"},
		{"..", ""},
		{"   ", ""},
		{"tab\there.csv", "tab_here.csv"},
		{"nul\x00byte.bin", "nul_byte.bin"},
		{"Résumé 2026.pdf", "Résumé 2026.pdf"},
		{"trailing.", "trailing.md"},
	} {
		got, err := SanitizeName(c.in)
		if c.want == "" {
			if desk.ErrorCode(err) != desk.EINVALID {
				t.Errorf("SanitizeName(%q) = %q, %v; want invalid", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("SanitizeName(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	long := strings.Repeat("é", 300) + ".xlsx"
	got, err := SanitizeName(long)
	if err != nil || len(got) > maxNameBytes || !strings.HasSuffix(got, ".xlsx") {
		t.Fatalf("long name: %q (%d bytes), %v", got, len(got), err)
	}
}
