package fsjail

import (
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/desk-runtime/desk"
)

// CheckName is the one rule for the name of a file or folder that desk
// writes for someone (an artifact, an actor's file, an imported entry): it
// refuses characters a person cannot see or that reorder what they see,
// and returns the name in Unicode normal form C, so that two spellings of
// one name ("é" as one code point or as "e" and a combining accent) are
// one file.
//
// Refused: C0 and C1 control characters and DEL (Cc), and every format
// character (Cf), which covers the bidirectional embeddings, overrides and
// isolates (U+202A–U+202E, U+2066–U+2069), the zero-width characters and
// marks (U+200B–U+200F, U+2060–U+2064, U+FEFF), the soft hyphen and the
// tag characters; also the line and paragraph separators (U+2028, U+2029).
// A name like "invoice\u202Efdp.exe" shows as "invoiceexe.pdf": such names
// exist only to mislead. Refusals are EINVALID and name the character.
func CheckName(name string) (string, error) {
	for _, r := range name {
		if why := invisible(r); why != "" {
			return "", desk.Errorf(desk.EINVALID, "name %q contains %U (%s); names may not contain control, invisible or text-direction characters", name, r, why)
		}
	}
	return norm.NFC.String(name), nil
}

func invisible(r rune) string {
	switch {
	case r == '\u2028' || r == '\u2029':
		return "a line or paragraph separator"
	case r >= '\u202A' && r <= '\u202E', r >= '\u2066' && r <= '\u2069':
		return "a bidirectional control"
	case unicode.Is(unicode.Cc, r):
		return "a control character"
	case unicode.Is(unicode.Cf, r):
		return "an invisible format character"
	}
	return ""
}

// CheckPathNames applies CheckName to every element of a slash-separated
// path and returns the path normalized.
func CheckPathNames(p string) (string, error) {
	out := make([]byte, 0, len(p))
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		e, err := CheckName(p[start:i])
		if err != nil {
			return "", err
		}
		out = append(out, e...)
		if i < len(p) {
			out = append(out, '/')
		}
		start = i + 1
	}
	return string(out), nil
}
