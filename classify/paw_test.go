package classify

import (
	"strings"
	"testing"
)

// The PawWork kinds are told apart from plain JSON and HTML by markers in
// the bytes, whatever the file is called.
func TestPawWorkKinds(t *testing.T) {
	big := strings.Repeat(`{"v": "padding padding padding"},`, 4000) // pushes markers past the 64 KiB head
	for _, c := range []struct {
		name, body, want string
	}{
		{"book.json", `{"id":"b1","sheetOrder":["s1"],"sheets":{"s1":{"name":"S","cellData":{"0":{"0":{"v":1}}}}}}`, JSONWorkbook},
		{"x.bin", `{"sheets":{"s1":{}},"sheetOrder":["s1"]}`, JSONWorkbook},
		{"doc.json", `{"id":"d1","body":{"dataStream":"Title\r\nHello\r\n","paragraphs":[]}}`, JSONDocument},
		{"canvas.json", `{"pawCanvas":1,"shapes":[]}`, JSONCanvas},
		{"draw.json", `{"store":{"shape:1":{}},"schema":{"schemaVersion":2}}`, JSONCanvas},
		{"late.json", `{"pad":[` + big + `{}],"sheetOrder":["a"],"sheets":{}}`, JSONWorkbook},
		// Near misses stay plain JSON.
		{"half.json", `{"sheets":{"s1":{}}}`, JSON},
		{"order.json", `{"sheetOrder":{},"sheets":{}}`, JSON},
		{"body.json", `{"body":"dataStream"}`, JSON},
		{"nested.json", `{"a":{"pawCanvas":1}}`, JSON},
		{"list.json", `[{"pawCanvas":1}]`, JSON},
		{"site.html", "<!doctype html><html data-paw-kind=\"site\"><body>hi</body></html>", HTMLSite},
		{"page", "<html><head><meta data-paw-kind='site'></head></html>", HTMLSite},
		{"plain.html", "<!doctype html><html><body>data-paw-kind=sitemap</body></html>", HTML},
		{"other.html", "<!doctype html><html data-paw-kind=\"document\"></html>", HTML},
	} {
		res := ClassifyBytes(c.name, "", []byte(c.body))
		if res.Kind != c.want {
			t.Errorf("%s: kind %s, want %s", c.name, res.Kind, c.want)
		}
		if !res.Text || Describe(res.Kind) == "unknown content" || Extension(res.Kind) == "" {
			t.Errorf("%s: %+v lacks its table row", c.name, res)
		}
	}
	// A .json name is satisfied by every JSON kind; a .pdf claim is not.
	if err := Check("book.json", "application/json", ClassifyBytes("book.json", "", []byte(`{"sheets":{},"sheetOrder":[]}`))); err != nil {
		t.Errorf("workbook named .json refused: %v", err)
	}
	if err := Check("book.pdf", "", ClassifyBytes("book.pdf", "", []byte(`{"sheets":{},"sheetOrder":[]}`))); err == nil {
		t.Error("a workbook named .pdf was accepted")
	}
	if got := previews(JSONWorkbook, JSONDocument, JSONCanvas, HTMLSite); got != "sheet docs design web" {
		t.Errorf("previews = %q", got)
	}
}

// previews lists the preview of each kind, for the test above.
func previews(kinds ...string) string {
	var out []string
	for _, k := range kinds {
		out = append(out, result(k).Preview)
	}
	return strings.Join(out, " ")
}
