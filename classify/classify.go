// Package classify owns open-artifact classification: deciding what a file is
// from its magic bytes first, with its name and media type only as hints (the
// PawWork open-ingest rule). It reads only a bounded head of a file (and a
// ZIP's central directory), never a whole large file, and never decodes ZIP or
// PDF bytes as text.
package classify

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"unicode/utf8"
)

// Kinds.
const (
	Empty    = "empty"
	PDF      = "pdf"
	XLSX     = "xlsx"
	DOCX     = "docx"
	PPTX     = "pptx"
	ZIP      = "zip"
	PNG      = "png"
	JPEG     = "jpeg"
	GIF      = "gif"
	WebP     = "webp"
	JSON     = "json"
	HTML     = "html"
	SVG      = "svg"
	CSV      = "csv"
	TSV      = "tsv"
	Markdown = "markdown"
	Text     = "text"
	Binary   = "binary"
)

// Result is what Classify decided about a file.
type Result struct {
	Kind      string // one of the kinds above
	MediaType string // canonical media type of the kind
	Text      bool   // the bytes may be shown/read as UTF-8 text
	Preview   string // how a UI should open it: "sheet", "docs", "slides", "design", "web", "gallery", "pdf", "html", "markdown", "text" or "file"
}

// HeadSize is how many leading bytes Classify reads.
const HeadSize = 64 << 10

// maxFullJSON is the largest file whose JSON validity Classify checks in
// full. Larger files are accepted as JSON when their head is a valid JSON
// prefix, so that a huge export never costs a full read.
const maxFullJSON = 8 << 20

// pdfSearch is how far into the file a PDF header may start. The PDF
// specification (and every mainstream reader) tolerates junk before the
// header within the first 1024 bytes.
const pdfSearch = 1024

// kindInfo is the fixed table behind Result, Describe and Extension, kept in
// one place so the four facts about a kind cannot drift apart.
type kindInfo struct {
	mediaType string
	text      bool
	preview   string
	describe  string
	extension string
}

var kinds = map[string]kindInfo{
	Empty:    {"application/octet-stream", false, "file", "empty content", ""},
	PDF:      {"application/pdf", false, "pdf", "a PDF document", ".pdf"},
	XLSX:     {"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", false, "sheet", "an XLSX workbook", ".xlsx"},
	DOCX:     {"application/vnd.openxmlformats-officedocument.wordprocessingml.document", false, "docs", "a DOCX document", ".docx"},
	PPTX:     {"application/vnd.openxmlformats-officedocument.presentationml.presentation", false, "slides", "a PPTX presentation", ".pptx"},
	ZIP:      {"application/zip", false, "file", "a ZIP archive", ".zip"},
	PNG:      {"image/png", false, "gallery", "a PNG image", ".png"},
	JPEG:     {"image/jpeg", false, "gallery", "a JPEG image", ".jpg"},
	GIF:      {"image/gif", false, "gallery", "a GIF image", ".gif"},
	WebP:     {"image/webp", false, "gallery", "a WebP image", ".webp"},
	JSON:     {"application/json", true, "text", "JSON", ".json"},
	HTML:     {"text/html; charset=utf-8", true, "html", "an HTML document", ".html"},
	SVG:      {"image/svg+xml", true, "gallery", "an SVG image", ".svg"},
	CSV:      {"text/csv; charset=utf-8", true, "sheet", "CSV text", ".csv"},
	TSV:      {"text/tab-separated-values; charset=utf-8", true, "sheet", "TSV text", ".tsv"},
	Markdown: {"text/markdown; charset=utf-8", true, "markdown", "Markdown text", ".md"},
	Text:     {"text/plain; charset=utf-8", true, "text", "plain text", ".txt"},
	Binary:   {"application/octet-stream", false, "file", "binary data", ".bin"},

	JSONWorkbook: {"application/json", true, "sheet", "a PawWork workbook (JSON)", ".json"},
	JSONDocument: {"application/json", true, "docs", "a PawWork document (JSON)", ".json"},
	JSONCanvas:   {"application/json", true, "design", "a PawWork canvas (JSON)", ".json"},
	HTMLSite:     {"text/html; charset=utf-8", true, "web", "a PawWork site (HTML)", ".html"},
}

// Describe returns a short human phrase for a kind, such as "a PNG image".
// An unknown kind is described as "unknown content".
func Describe(kind string) string {
	if k, ok := kinds[kind]; ok {
		return k.describe
	}
	return "unknown content"
}

// Extension returns the usual file extension for a kind including the dot
// (".png", ".md" for markdown, ".txt" for text, ".bin" for binary, "" for
// empty and for unknown kinds).
func Extension(kind string) string {
	return kinds[kind].extension
}

func result(kind string) Result {
	k := kinds[kind]
	return Result{Kind: kind, MediaType: k.mediaType, Text: k.text, Preview: k.preview}
}

// emptyResult classifies empty content. Nothing can be learned from zero
// bytes, so the media type follows the hints: an empty "report.pdf" is a
// placeholder for a PDF and should be served as one.
func emptyResult(name, mediaType string) Result {
	res := result(Empty)
	if mt := normalizeMediaType(mediaType); mt != "" {
		res.MediaType = mt
	} else if e := ext(name); e != "" {
		if mt := normalizeMediaType(mime.TypeByExtension(e)); mt != "" {
			res.MediaType = mt
		}
	}
	return res
}

// ClassifyBytes is Classify over an in-memory slice.
func ClassifyBytes(name, mediaType string, b []byte) Result {
	// A bytes.Reader only ever fails with io.EOF, which Classify absorbs, so
	// there is no error to report.
	res, _ := Classify(name, mediaType, bytes.NewReader(b), int64(len(b)))
	return res
}

// Classify decides what the size bytes readable from r are. name and
// mediaType are hints (either may be empty). It reads at most HeadSize bytes
// from the start plus, for ZIP files, the central directory through
// archive/zip.NewReader(r, size). Errors are only I/O errors from r.
//
// The one exception to the HeadSize bound is JSON: a file that starts like
// JSON and is at most 8 MiB is validated in full (streamed, never held in
// memory), because a JSON prefix alone does not make a JSON file.
func Classify(name, mediaType string, r io.ReaderAt, size int64) (Result, error) {
	if size <= 0 {
		return emptyResult(name, mediaType), nil
	}
	head := make([]byte, min(size, HeadSize))
	n, err := r.ReadAt(head, 0)
	if n < len(head) && err != nil && !errors.Is(err, io.EOF) {
		return Result{}, fmt.Errorf("classify: reading head: %w", err)
	}
	head = head[:n]
	if int64(n) < int64(cap(head)) {
		// The reader ended before the promised size. Believe the bytes, not
		// the caller: the file is exactly what could be read.
		size = int64(n)
	}
	if size == 0 {
		return emptyResult(name, mediaType), nil
	}

	// Magic bytes at offset 0 are checked before the PDF search below, because
	// a ZIP that stores a PDF uncompressed (or a PNG with a text chunk) can
	// carry "%PDF-" within its first kilobyte without being a PDF.
	switch {
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return result(PDF), nil
	case bytes.HasPrefix(head, []byte("PK\x03\x04")),
		bytes.HasPrefix(head, []byte("PK\x05\x06")),
		bytes.HasPrefix(head, []byte("PK\x07\x08")):
		return classifyZip(r, size)
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return result(PNG), nil
	case bytes.HasPrefix(head, []byte("\xFF\xD8\xFF")):
		return result(JPEG), nil
	case bytes.HasPrefix(head, []byte("GIF87a")), bytes.HasPrefix(head, []byte("GIF89a")):
		return result(GIF), nil
	case len(head) >= 12 && string(head[:4]) == "RIFF" && string(head[8:12]) == "WEBP":
		return result(WebP), nil
	case hasLatePDFHeader(head):
		return result(PDF), nil
	}

	truncated := int64(len(head)) < size
	body, bomLen := head, 0
	if bytes.HasPrefix(body, []byte("\xEF\xBB\xBF")) {
		body, bomLen = body[3:], 3
	}
	if truncated {
		body = trimCutRune(body)
	}
	if bytes.IndexByte(body, 0) >= 0 || !utf8.Valid(body) {
		return result(Binary), nil
	}

	ok, err := isJSON(r, size, body, int64(bomLen), truncated)
	if err != nil {
		return Result{}, err
	}
	if ok {
		// The PawWork kinds are read from the same bytes isJSON just
		// validated: all of them up to maxFullJSON, the head beyond.
		var rd io.Reader = bytes.NewReader(body)
		if truncated && size <= maxFullJSON {
			rd = io.NewSectionReader(r, int64(bomLen), size-int64(bomLen))
		}
		return result(jsonKind(rd)), nil
	}
	if isSVG(body) {
		return result(SVG), nil
	}
	if isHTML(body) {
		return result(htmlKind(body)), nil
	}
	// Hints come before the sniffs: a name or media type is weak evidence
	// against magic bytes, but it is better evidence than a comma count.
	switch hint := textHint(name, mediaType); hint {
	case CSV, TSV, Markdown, Text:
		return result(hint), nil
	}
	if kind := sniffDelimited(body, truncated); kind != "" {
		return result(kind), nil
	}
	if looksLikeMarkdown(body) {
		return result(Markdown), nil
	}
	return result(Text), nil
}

// hasLatePDFHeader reports a PDF header after leading junk within the first
// 1024 bytes. Unlike a header at offset 0 it must carry a version digit
// ("%PDF-1"), which keeps a text file that merely mentions "%PDF-" from being
// taken for a PDF.
func hasLatePDFHeader(head []byte) bool {
	window := head[:min(len(head), pdfSearch+len("%PDF-1"))]
	for off := 0; ; {
		i := bytes.Index(window[off:], []byte("%PDF-"))
		if i < 0 {
			return false
		}
		at := off + i
		if at >= pdfSearch {
			return false
		}
		if v := at + len("%PDF-"); v < len(window) && window[v] >= '0' && window[v] <= '9' {
			return true
		}
		off = at + 1
	}
}

// classifyZip opens the central directory and looks for the part that makes
// an Office Open XML package. A ZIP that cannot be opened is still a ZIP: its
// magic bytes say so, and decoding it as text would be wrong.
func classifyZip(r io.ReaderAt, size int64) (Result, error) {
	er := &errReaderAt{r: r}
	zr, err := zip.NewReader(er, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		// zip.NewReader mixes format errors with I/O errors from r; only the
		// latter are the caller's business.
		if er.err != nil {
			return Result{}, fmt.Errorf("classify: reading zip directory: %w", er.err)
		}
		return result(ZIP), nil
	}
	// OPC part names are case-insensitive, so the match is too.
	for _, f := range zr.File {
		switch {
		case strings.EqualFold(f.Name, "xl/workbook.xml"):
			return result(XLSX), nil
		case strings.EqualFold(f.Name, "word/document.xml"):
			return result(DOCX), nil
		case strings.EqualFold(f.Name, "ppt/presentation.xml"):
			return result(PPTX), nil
		}
	}
	return result(ZIP), nil
}

// errReaderAt remembers the first real I/O error of an underlying reader, so
// that a library that folds it into its own error can still be told apart
// from bad content. io.EOF is normal at the end of the data and not recorded.
type errReaderAt struct {
	r   io.ReaderAt
	err error
}

func (e *errReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := e.r.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) && e.err == nil {
		e.err = err
	}
	return n, err
}

// errReader is errReaderAt for a sequential reader.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && e.err == nil {
		e.err = err
	}
	return n, err
}

// trimCutRune drops an incomplete UTF-8 sequence at the very end of a
// truncated head: the head boundary may fall inside a rune of a perfectly
// valid text file.
func trimCutRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// isJSON reports whether the file is a single JSON object or array. body is
// the head without BOM (and without a cut rune); bomLen is where the JSON
// starts in the file.
func isJSON(r io.ReaderAt, size int64, body []byte, bomLen int64, truncated bool) (bool, error) {
	first := bytes.TrimLeft(body, " \t\r\n")
	if len(first) == 0 || (first[0] != '{' && first[0] != '[') {
		return false, nil
	}
	switch {
	case !truncated:
		// The whole file is in memory already, so validate it there.
		return validJSONStream(bytes.NewReader(body), false), nil
	case size <= maxFullJSON:
		er := &errReader{r: io.NewSectionReader(r, bomLen, size-bomLen)}
		ok := validJSONStream(er, false)
		if er.err != nil {
			return false, fmt.Errorf("classify: reading json: %w", er.err)
		}
		return ok, nil
	default:
		return validJSONStream(bytes.NewReader(body), true), nil
	}
}

// validJSONStream walks the JSON token by token, so that memory stays bounded
// by the largest single token rather than by the file. It requires exactly
// one top-level value. With prefixOnly the input is a head cut from a longer
// file, and running out of input is accepted instead of refused.
func validJSONStream(rd io.Reader, prefixOnly bool) bool {
	dec := json.NewDecoder(rd)
	// Numbers are kept as text: valid JSON such as 1e999 does not fit a
	// float64 and must not be refused for that.
	dec.UseNumber()
	cutOff := func(err error) bool {
		return prefixOnly && (err == io.EOF || err == io.ErrUnexpectedEOF)
	}
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return cutOff(err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			break
		}
	}
	// A second top-level value (JSON Lines, concatenated documents) is not a
	// JSON file; only trailing whitespace may follow.
	_, err := dec.Token()
	return err == io.EOF || cutOff(err)
}

// skipMarkupProlog skips what may precede the root element of an XML or HTML
// document: whitespace, comments, processing instructions (including the
// <?xml ...?> declaration) and, when skipDoctype is set, a doctype that is
// not the HTML one. It returns nil when the head ends inside one of those.
func skipMarkupProlog(b []byte, skipDoctype bool) []byte {
	for {
		b = bytes.TrimLeft(b, " \t\r\n\f")
		switch {
		case bytes.HasPrefix(b, []byte("<!--")):
			i := bytes.Index(b[4:], []byte("-->"))
			if i < 0 {
				return nil
			}
			b = b[4+i+3:]
		case bytes.HasPrefix(b, []byte("<?")):
			i := bytes.Index(b, []byte("?>"))
			if i < 0 {
				return nil
			}
			b = b[i+2:]
		case skipDoctype && hasPrefixFold(b, "<!doctype") && !isHTMLDoctype(b):
			i := doctypeEnd(b)
			if i < 0 {
				return nil
			}
			b = b[i:]
		default:
			return b
		}
	}
}

// doctypeEnd returns the offset just past a doctype declaration, stepping
// over an internal subset in brackets, or -1 when it does not end in b.
func doctypeEnd(b []byte) int {
	depth := 0
	for i, c := range b {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case '>':
			if depth <= 0 {
				return i + 1
			}
		}
	}
	return -1
}

// isSVG reports whether the root element is <svg>. XML is case-sensitive, so
// the element name is too.
func isSVG(body []byte) bool {
	return startsTag(skipMarkupProlog(body, true), "<svg", false)
}

// isHTML reports whether the first tag is an HTML doctype or one of the tags
// only a whole HTML document starts with. A fragment such as "<div>" is not
// enough, because HTML is rendered and should not be guessed into.
func isHTML(body []byte) bool {
	b := skipMarkupProlog(body, false)
	if isHTMLDoctype(b) {
		return true
	}
	for _, tag := range []string{"<html", "<head", "<body"} {
		if startsTag(b, tag, true) {
			return true
		}
	}
	return false
}

// isHTMLDoctype reports "<!doctype html" followed by a delimiter, in any case.
func isHTMLDoctype(b []byte) bool {
	if !hasPrefixFold(b, "<!doctype") {
		return false
	}
	rest := b[len("<!doctype"):]
	trimmed := bytes.TrimLeft(rest, " \t\r\n\f")
	if len(trimmed) == len(rest) {
		return false
	}
	return startsTag(trimmed, "html", true)
}

// startsTag reports whether b starts with name followed by whitespace, '>',
// '/' or the end of b, so that "<head" does not match "<header>".
func startsTag(b []byte, name string, fold bool) bool {
	if fold {
		if !hasPrefixFold(b, name) {
			return false
		}
	} else if !bytes.HasPrefix(b, []byte(name)) {
		return false
	}
	if len(b) == len(name) {
		return true
	}
	switch b[len(name)] {
	case ' ', '\t', '\r', '\n', '\f', '>', '/':
		return true
	}
	return false
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && strings.EqualFold(string(b[:len(prefix)]), prefix)
}

// textHint returns the text kind a name or media type asks for: CSV, TSV or
// Markdown, or Text for an explicit plain-text hint (which turns the sniffs
// off), or "" when there is no usable hint. The extension is asked first,
// because browsers often send a generic media type for a well-named file.
func textHint(name, mediaType string) string {
	switch ext(name) {
	case ".csv":
		return CSV
	case ".tsv", ".tab":
		return TSV
	case ".md", ".markdown", ".mdown":
		return Markdown
	}
	switch baseMediaType(mediaType) {
	case "text/csv":
		return CSV
	case "text/tab-separated-values":
		return TSV
	case "text/markdown", "text/x-markdown":
		return Markdown
	}
	if e := ext(name); e == ".txt" || e == ".text" || baseMediaType(mediaType) == "text/plain" {
		return Text
	}
	return ""
}

// sniffDelimited recognises tables without a hint. The rule is deliberately
// simple: at least two non-empty lines in the head, and every one of them has
// the same non-zero number of tabs (TSV) or else the same non-zero number of
// commas outside double quotes (CSV; a quoted field may span lines). When the
// head is truncated its last line may be cut, so it is left out.
func sniffDelimited(body []byte, truncated bool) string {
	if k := sameCount(splitRecords(body, '\t', false, truncated)); k {
		return TSV
	}
	if k := sameCount(splitRecords(body, ',', true, truncated)); k {
		return CSV
	}
	return ""
}

// splitRecords returns the separator count of each non-empty record. With
// quoted set, separators and newlines inside double quotes do not count.
func splitRecords(body []byte, sep byte, quoted, truncated bool) []int {
	var counts []int
	count, nonEmpty, inQuote := 0, false, false
	for _, c := range body {
		switch {
		case quoted && c == '"':
			inQuote = !inQuote
			nonEmpty = true
		case inQuote:
			nonEmpty = true
		case c == '\n':
			if nonEmpty {
				counts = append(counts, count)
			}
			count, nonEmpty = 0, false
		case c == sep:
			count++
			nonEmpty = true
		case c != ' ' && c != '\t' && c != '\r':
			nonEmpty = true
		}
	}
	if nonEmpty && !truncated && !inQuote {
		counts = append(counts, count)
	}
	return counts
}

func sameCount(counts []int) bool {
	if len(counts) < 2 || counts[0] == 0 {
		return false
	}
	for _, c := range counts[1:] {
		if c != counts[0] {
			return false
		}
	}
	return true
}

// looksLikeMarkdown recognises Markdown without a hint: the first non-empty
// line is a level-one heading ("# "), or some line opens a fenced code block
// ("```" after at most three spaces of indentation).
func looksLikeMarkdown(body []byte) bool {
	first := true
	for line := range bytes.Lines(body) {
		line = bytes.TrimRight(line, "\r\n")
		if first && len(bytes.TrimSpace(line)) > 0 {
			if bytes.HasPrefix(line, []byte("# ")) {
				return true
			}
			first = false
		}
		indent := len(line) - len(bytes.TrimLeft(line, " "))
		if indent <= 3 && bytes.HasPrefix(line[indent:], []byte("```")) {
			return true
		}
	}
	return false
}

// ext returns the lower-case extension of the last element of name, with
// either slash as separator.
func ext(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return ""
	}
	return strings.ToLower(name[i:])
}

// baseMediaType returns the lower-case type/subtype of a media type, without
// parameters, or "" when there is none.
func baseMediaType(mt string) string {
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// normalizeMediaType lower-cases the type and parameter names and reformats
// the parameters canonically; an unparsable value falls back to its base type.
func normalizeMediaType(mt string) string {
	if strings.TrimSpace(mt) == "" {
		return ""
	}
	t, params, err := mime.ParseMediaType(mt)
	if err != nil {
		return baseMediaType(mt)
	}
	if s := mime.FormatMediaType(t, params); s != "" {
		return s
	}
	return baseMediaType(mt)
}
