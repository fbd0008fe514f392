package session

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/desk-runtime/desk"
)

// maxNameBytes keeps artifact names well under the 255-byte limit of common
// file systems, leaving room for desk's temporary-file prefix.
const maxNameBytes = 200

// SanitizeName turns a requested artifact name into a safe file name: path
// separators become '-', control characters become '_', leading dots and
// spaces are dropped (no hidden files, no "." or ".."), the extension is kept
// when the name is shortened, and ".md" is added when there is none.
func SanitizeName(name string) (string, error) {
	if !utf8.ValidString(name) {
		name = strings.ToValidUTF8(name, "_")
	}
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '/' || r == '\\':
			b.WriteRune('-')
		case unicode.IsControl(r) || r == utf8.RuneError:
			b.WriteRune('_')
		default:
			b.WriteRune(r)
		}
	}
	// One spelling per name: "é" as one code point or as "e" and an accent
	// is one file (Unicode normal form C).
	s := strings.TrimSpace(norm.NFC.String(b.String()))
	s = strings.TrimLeft(s, ". ")
	s = strings.TrimRight(s, ". ")
	if s == "" {
		return "", desk.Errorf(desk.EINVALID, "artifact name %q is empty once separators, control characters and leading dots are removed", name)
	}
	ext := extension(s)
	if ext == "" {
		ext = ".md"
		s += ext
	}
	if len(s) > maxNameBytes {
		base := strings.TrimSuffix(s, ext)
		limit := maxNameBytes - len(ext)
		for len(base) > limit || !utf8.ValidString(base) {
			base = base[:len(base)-1]
		}
		s = base + ext
	}
	return s, nil
}

// extension returns s's extension when it looks like one (a dot and 1-16
// letters or digits), else "".
func extension(s string) string {
	ext := path.Ext(s)
	if len(ext) < 2 || len(ext) > 17 || ext == s {
		return ""
	}
	for _, r := range ext[1:] {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return ""
		}
	}
	return ext
}
