package classify

import (
	"encoding/json"
	"io"
	"regexp"
)

// PawWork's open-artifact table keeps these apart from plain JSON and HTML,
// because each opens in its own canvas: a workbook as a sheet, a document as
// text, a canvas as a drawing and a site in the web frame. They are told
// apart by markers in the bytes, never by a name:
//
//   - json-workbook: a JSON object with "sheets" (object) and "sheetOrder"
//     (array) at its top level, the pair Univer's IWorkbookData requires;
//   - json-document: a JSON object whose top-level "body" is an object with
//     a "dataStream", Univer's IDocumentData;
//   - json-canvas: a JSON object with a top-level "pawCanvas" key
//     (PawWork's marker), or a tldraw snapshot ("store" and "schema");
//   - html-site: HTML whose head carries data-paw-kind="site".
const (
	JSONWorkbook = "json-workbook"
	JSONDocument = "json-document"
	JSONCanvas   = "json-canvas"
	HTMLSite     = "html-site"
)

// IsJSON reports whether kind is JSON or one of its PawWork kinds.
func IsJSON(kind string) bool {
	return kind == JSON || kind == JSONWorkbook || kind == JSONDocument || kind == JSONCanvas
}

// IsHTML reports whether kind is HTML or a PawWork site.
func IsHTML(kind string) bool { return kind == HTML || kind == HTMLSite }

var siteMarker = regexp.MustCompile(`(?i)\bdata-paw-kind\s*=\s*["']?site(?:["'\s>/]|$)`)

func htmlKind(head []byte) string {
	if siteMarker.Match(head) {
		return HTMLSite
	}
	return HTML
}

// jsonKind walks the keys of a JSON object's first two levels (the values
// below are skipped token by token, so memory stays bounded by the largest
// token) and names the PawWork kind its markers make it, or JSON. rd holds
// the file or, for one larger than maxFullJSON, its head: a marker past the
// head is then not seen and the file stays plain JSON.
func jsonKind(rd io.Reader) string {
	dec := json.NewDecoder(rd)
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return JSON
	}
	top := map[string]bool{}
	var sheetsObject, sheetOrderArray, bodyStream bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		top[key] = true
		first, err := dec.Token()
		if err != nil {
			break
		}
		d, isDelim := first.(json.Delim)
		switch {
		case key == "sheets" && d == '{':
			sheetsObject = true
		case key == "sheetOrder" && d == '[':
			sheetOrderArray = true
		case key == "body" && d == '{':
			// One level down: is there a "dataStream" key?
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return kindOf(top, sheetsObject, sheetOrderArray, bodyStream)
				}
				if k == "dataStream" {
					bodyStream = true
				}
				if !skipValue(dec) {
					return kindOf(top, sheetsObject, sheetOrderArray, bodyStream)
				}
			}
			if _, err := dec.Token(); err != nil { // the body's '}'
				return kindOf(top, sheetsObject, sheetOrderArray, bodyStream)
			}
			continue
		}
		if isDelim && (d == '{' || d == '[') && !skipRest(dec) {
			break
		}
	}
	return kindOf(top, sheetsObject, sheetOrderArray, bodyStream)
}

func kindOf(top map[string]bool, sheets, sheetOrder, bodyStream bool) string {
	switch {
	case top["pawCanvas"], top["store"] && top["schema"]:
		return JSONCanvas
	case sheets && sheetOrder:
		return JSONWorkbook
	case bodyStream:
		return JSONDocument
	}
	return JSON
}

// skipValue skips one whole JSON value.
func skipValue(dec *json.Decoder) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		return skipRest(dec)
	}
	return true
}

// skipRest skips to the end of the object or array whose opening delimiter
// was just read.
func skipRest(dec *json.Decoder) bool {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return true
}
