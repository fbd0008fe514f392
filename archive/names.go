package archive

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// File name rule. The stem of a file is Encode(channel) + "--" +
// Encode(conversation id), where each part is the id's UTF-8 bytes with
//
//   - every byte outside [A-Za-z0-9._-] written as %XX (uppercase hex);
//   - a leading '.' written as %2E (no hidden files, no "." or "..");
//   - in the channel only, every '-' that is next to another '-' or is the
//     channel's last byte written as %2D, so the encoded channel never
//     contains "--" and never ends with '-', which makes the first "--" of a
//     stem the separator.
//
// Everything else is kept as is, so ordinary ids stay readable
// ("feishu--oc_8f3a.ndjson"). A stem longer than MaxStem bytes keeps its
// first bytes (never splitting a %XX) and ends with '~' and the first 16 hex
// digits of the SHA-256 of the full stem; '~' never appears in an encoded
// stem, so a shortened name is recognisable and is the only kind DecodeName
// cannot reverse (every record still carries the exact ids). The archive
// file is stem + ".ndjson" and the conversation view stem + ".md".
const MaxStem = 200

const (
	ext     = ".ndjson"
	viewExt = ".md"
	hashLen = 16
)

func safeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

const hexUpper = "0123456789ABCDEF"

func encodePart(s string, channel bool) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		keep := safeByte(c)
		if c == '.' && i == 0 {
			keep = false
		}
		if c == '-' && channel && (i == len(s)-1 || s[i+1] == '-' || i > 0 && s[i-1] == '-') {
			keep = false
		}
		if keep {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hexUpper[c>>4])
			b.WriteByte(hexUpper[c&15])
		}
	}
	return b.String()
}

// Stem returns the file name stem of a channel and conversation id (see the
// rule above). Both ids must be non-empty.
func Stem(channel, conversation string) (string, error) {
	if channel == "" {
		return "", refuse("channel", "required")
	}
	if conversation == "" {
		return "", refuse("conversation_id", "required")
	}
	s := encodePart(channel, true) + "--" + encodePart(conversation, false)
	if len(s) <= MaxStem {
		return s, nil
	}
	sum := sha256.Sum256([]byte(s))
	cut := MaxStem - 1 - hashLen
	// Do not leave half an escape at the end of the prefix.
	if s[cut-1] == '%' {
		cut--
	} else if s[cut-2] == '%' {
		cut -= 2
	}
	return s[:cut] + "~" + hex.EncodeToString(sum[:])[:hashLen], nil
}

// FileName returns the archive file name of a channel and conversation id:
// Stem + ".ndjson".
func FileName(channel, conversation string) (string, error) {
	s, err := Stem(channel, conversation)
	if err != nil {
		return "", err
	}
	return s + ext, nil
}

// Shortened reports whether a stem or file name was shortened with a hash.
func Shortened(name string) bool { return strings.Contains(name, "~") }

// DecodeName returns the channel and conversation id of an archive file name
// (with or without ".ndjson", or a view name ending in ".md"). It fails for
// a shortened name and for any name that is not exactly what Stem produces.
func DecodeName(name string) (channel, conversation string, err error) {
	stem := strings.TrimSuffix(name, ext)
	if stem == name {
		stem = strings.TrimSuffix(name, viewExt)
	}
	if Shortened(stem) {
		return "", "", refuse("name", "%q is shortened; read the ids from its records", name)
	}
	i := strings.Index(stem, "--")
	if i < 0 {
		return "", "", refuse("name", "%q has no \"--\"", name)
	}
	channel, ok1 := unescape(stem[:i])
	conversation, ok2 := unescape(stem[i+2:])
	if !ok1 || !ok2 || channel == "" || conversation == "" {
		return "", "", refuse("name", "%q is not an archive name", name)
	}
	if again, _ := Stem(channel, conversation); again != stem {
		return "", "", refuse("name", "%q is not in canonical form", name)
	}
	return channel, conversation, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func unescape(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if !safeByte(c) {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	out := b.String()
	return out, utf8.ValidString(out)
}
