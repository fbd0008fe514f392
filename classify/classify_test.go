package classify

import (
	"archive/zip"
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/desk-runtime/desk"
)

// zipBytes builds a real ZIP with the given entry names, each holding a tiny
// XML-ish body, written with method (zip.Deflate or zip.Store).
func zipBytes(t testing.TB, method uint16, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range names {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, `<?xml version="1.0"?><x/>`); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func xlsxBytes(t testing.TB) []byte {
	return zipBytes(t, zip.Deflate, "[Content_Types].xml", "_rels/.rels", "xl/workbook.xml", "xl/worksheets/sheet1.xml")
}

func docxBytes(t testing.TB) []byte {
	return zipBytes(t, zip.Deflate, "[Content_Types].xml", "_rels/.rels", "word/document.xml")
}

func pptxBytes(t testing.TB) []byte {
	return zipBytes(t, zip.Deflate, "[Content_Types].xml", "_rels/.rels", "ppt/presentation.xml", "ppt/slides/slide1.xml")
}

func plainZipBytes(t testing.TB) []byte {
	return zipBytes(t, zip.Deflate, "notes.txt", "data/table.csv")
}

func testImage() image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for x := range 4 {
		for y := range 4 {
			img.Set(x, y, color.RGBA{uint8(x * 60), uint8(y * 60), 128, 255})
		}
	}
	return img
}

func pngBytes(t testing.TB) []byte {
	var buf bytes.Buffer
	if err := png.Encode(&buf, testImage()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func jpegBytes(t testing.TB) []byte {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, testImage(), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gifBytes(t testing.TB) []byte {
	var buf bytes.Buffer
	if err := gif.Encode(&buf, testImage(), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// webpBytes is a hand-built RIFF/WEBP header with a (meaningless) VP8L chunk;
// classification only looks at the container signature.
func webpBytes() []byte {
	payload := []byte("VP8L\x05\x00\x00\x00\x2f\x00\x00\x00\x00\x00")
	size := 4 + len(payload)
	b := []byte("RIFF")
	b = append(b, byte(size), byte(size>>8), byte(size>>16), byte(size>>24))
	b = append(b, "WEBP"...)
	return append(b, payload...)
}

const pdfText = "%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n" +
	"2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\n" +
	"trailer\n<< /Root 1 0 R >>\n%%EOF\n"

type fixture struct {
	name, mediaType string
	data            []byte
	kind            string
}

// fixtures returns every generated sample, misleading names included.
func fixtures(t testing.TB) []fixture {
	xlsx, docx, pptx, plainZip := xlsxBytes(t), docxBytes(t), pptxBytes(t), plainZipBytes(t)
	pngB, jpegB, gifB, webpB := pngBytes(t), jpegBytes(t), gifBytes(t), webpBytes()
	pdfB := []byte(pdfText)
	return []fixture{
		{"empty.txt", "", nil, Empty},
		{"report.pdf", "", pdfB, PDF},
		{"junk-first.pdf", "", append([]byte("HTTP junk before the header\r\n\r\n"), pdfB...), PDF},
		{"book.xlsx", "", xlsx, XLSX},
		{"letter.docx", "", docx, DOCX},
		{"deck.pptx", "", pptx, PPTX},
		{"bundle.zip", "", plainZip, ZIP},
		{"stored.zip", "", zipBytes(t, zip.Store, "a.pdf"), ZIP},
		{"broken.zip", "", []byte("PK\x03\x04 this is not really a zip at all"), ZIP},
		{"photo.png", "", pngB, PNG},
		{"photo.jpg", "", jpegB, JPEG},
		{"anim.gif", "", gifB, GIF},
		{"pic.webp", "", webpB, WebP},
		{"data.json", "", []byte(`{"a": [1, 2.5e999, "x"], "b": {"c": null}}`), JSON},
		{"list.json", "", []byte("\xEF\xBB\xBF  [true, false]\n"), JSON},
		{"page.html", "", []byte("<!DOCTYPE html>\n<html><body>hi</body></html>"), HTML},
		{"bare.html", "", []byte("  <!-- generated -->\n<HTML lang=en><p>hi"), HTML},
		{"fragment.html", "", []byte("<header>not a document</header>"), Text},
		{"icon.svg", "", []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>`), SVG},
		{"prolog.svg", "", []byte("<?xml version=\"1.0\"?>\n<!-- c -->\n" +
			"<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n" +
			"<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>"), SVG},
		{"table.csv", "", []byte("a;b\n1;2\n"), CSV},
		{"sniffed", "", []byte("name,age\n\"Smith, J\",42\nDoe,7\n"), CSV},
		{"sniffed", "", []byte("name\tage\nSmith\t42\r\nDoe\t7\n"), TSV},
		{"upload", "text/tab-separated-values", []byte("just text"), TSV},
		{"readme.md", "", []byte("Some notes without any markup.\n"), Markdown},
		{"sniffed", "", []byte("\n# Title\n\nBody text.\n"), Markdown},
		{"sniffed", "", []byte("Run this:\n\n```sh\ngo test\n```\n"), Markdown},
		{"notes.txt", "", []byte("# Not markdown, the name says plain text\n"), Text},
		{"notes", "", []byte("Hello, world.\nJust some text.\n"), Text},
		{"utf8", "", []byte("\xEF\xBB\xBFgrüße, 世界\n"), Text},
		{"blob", "", []byte("abc\x00def"), Binary},
		{"latin1.txt", "", []byte("caf\xe9 au lait"), Binary},
		{"cut-rune.txt", "", []byte("ends in half a rune \xc3"), Binary},
		{"notjson.json", "", []byte(`{"a": 1,}`), Text},
		{"two.json", "", []byte("{}\n{}\n"), Text},
		// Misleading names: the magic bytes win.
		{"notes.txt", "", pdfB, PDF},
		{"data.csv", "text/csv", plainZip, ZIP},
		{"sheet.xlsx", "", docx, DOCX},
		{"readme.md", "", pngB, PNG},
		{"x.txt", "", []byte(`{"ok": true}`), JSON},
		{"photo.png", "image/png", []byte("I am not a picture"), Text},
		// A stored PDF inside a ZIP puts "%PDF-" in the first kilobyte; the
		// ZIP magic at offset 0 must still win.
		{"pdfs.zip", "", zipStoringPDF(t), ZIP},
	}
}

func zipStoringPDF(t testing.TB) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "a.pdf", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, pdfText)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var wantText = map[string]bool{JSON: true, HTML: true, SVG: true, CSV: true, TSV: true, Markdown: true, Text: true}

var wantPreview = map[string]string{
	XLSX: "sheet", CSV: "sheet", TSV: "sheet", DOCX: "docs", PPTX: "slides",
	PNG: "gallery", JPEG: "gallery", GIF: "gallery", WebP: "gallery", SVG: "gallery",
	PDF: "pdf", HTML: "html", Markdown: "markdown", Text: "text", JSON: "text",
	ZIP: "file", Binary: "file", Empty: "file",
}

func TestClassifyFixtures(t *testing.T) {
	for _, fx := range fixtures(t) {
		got := ClassifyBytes(fx.name, fx.mediaType, fx.data)
		if got.Kind != fx.kind {
			t.Errorf("%s (%.20q): kind %q, want %q", fx.name, fx.data, got.Kind, fx.kind)
			continue
		}
		if got.Text != wantText[fx.kind] {
			t.Errorf("%s: Text = %v for kind %s", fx.name, got.Text, fx.kind)
		}
		if got.Preview != wantPreview[fx.kind] {
			t.Errorf("%s: Preview = %q, want %q", fx.name, got.Preview, wantPreview[fx.kind])
		}
		if fx.kind != Empty && got.MediaType != kinds[fx.kind].mediaType {
			t.Errorf("%s: MediaType = %q, want %q", fx.name, got.MediaType, kinds[fx.kind].mediaType)
		}
		// Classify over a ReaderAt must agree with ClassifyBytes.
		res, err := Classify(fx.name, fx.mediaType, bytes.NewReader(fx.data), int64(len(fx.data)))
		if err != nil || res != got {
			t.Errorf("%s: Classify = %+v, %v; ClassifyBytes = %+v", fx.name, res, err, got)
		}
	}
}

func TestMediaTypes(t *testing.T) {
	want := map[string]string{
		PDF:      "application/pdf",
		XLSX:     "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
		DOCX:     "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
		PPTX:     "application/vnd.openxmlformats-officedocument.presentationml.presentation",
		ZIP:      "application/zip",
		PNG:      "image/png",
		JPEG:     "image/jpeg",
		GIF:      "image/gif",
		WebP:     "image/webp",
		JSON:     "application/json",
		HTML:     "text/html; charset=utf-8",
		SVG:      "image/svg+xml",
		CSV:      "text/csv; charset=utf-8",
		TSV:      "text/tab-separated-values; charset=utf-8",
		Markdown: "text/markdown; charset=utf-8",
		Text:     "text/plain; charset=utf-8",
		Binary:   "application/octet-stream",
	}
	for kind, mt := range want {
		if got := result(kind).MediaType; got != mt {
			t.Errorf("%s: media type %q, want %q", kind, got, mt)
		}
	}
}

func TestEmptyMediaType(t *testing.T) {
	cases := []struct{ name, mediaType, want string }{
		{"", "", "application/octet-stream"},
		{"noext", "", "application/octet-stream"},
		{"report.PDF", "", "application/pdf"},
		{"pic.png", "", "image/png"},
		{"x", "Text/Plain; Charset=utf-8", "text/plain; charset=utf-8"},
		{"report.pdf", "image/png", "image/png"},
	}
	for _, c := range cases {
		got := ClassifyBytes(c.name, c.mediaType, nil)
		if got.Kind != Empty || got.Text || got.Preview != "file" || got.MediaType != c.want {
			t.Errorf("empty %q %q: %+v, want media type %q", c.name, c.mediaType, got, c.want)
		}
	}
}

func TestDescribeAndExtension(t *testing.T) {
	describe := map[string]string{
		PNG: "a PNG image", PDF: "a PDF document", XLSX: "an XLSX workbook", DOCX: "a DOCX document",
		PPTX: "a PPTX presentation", ZIP: "a ZIP archive", JSON: "JSON", HTML: "an HTML document",
		SVG: "an SVG image", CSV: "CSV text", TSV: "TSV text", Markdown: "Markdown text",
		Text: "plain text", Binary: "binary data", Empty: "empty content", JPEG: "a JPEG image",
		GIF: "a GIF image", WebP: "a WebP image",
	}
	for kind, want := range describe {
		if got := Describe(kind); got != want {
			t.Errorf("Describe(%q) = %q, want %q", kind, got, want)
		}
	}
	extension := map[string]string{
		PNG: ".png", Markdown: ".md", Text: ".txt", Binary: ".bin", Empty: "", PDF: ".pdf",
		XLSX: ".xlsx", JPEG: ".jpg", JSON: ".json", SVG: ".svg", "nonsense": "",
	}
	for kind, want := range extension {
		if got := Extension(kind); got != want {
			t.Errorf("Extension(%q) = %q, want %q", kind, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	pngB, jpegB, pdfB := pngBytes(t), jpegBytes(t), []byte(pdfText)
	xlsx, docx, plainZip := xlsxBytes(t), docxBytes(t), plainZipBytes(t)

	refused := []struct {
		name, mediaType string
		data            []byte
		contains        []string
	}{
		{"a.png", "", []byte("hello"), []string{`"a.png"`, "PNG", "plain text"}},
		{"report.pdf", "", pngB, []string{`"report.pdf"`, "the name says PDF", "a PNG image"}},
		{"book.xlsx", "", plainZip, []string{`"book.xlsx"`, "XLSX", "a ZIP archive"}},
		{"sheet.xlsx", "", docx, []string{`"sheet.xlsx"`, "XLSX", "a DOCX document"}},
		{"letter.docx", "", xlsx, []string{`"letter.docx"`, "DOCX", "an XLSX workbook"}},
		{"x.bin", "image/png", []byte("hello"), []string{`"x.bin": the media type image/png says PNG but the bytes are plain text`}},
		{"upload", "IMAGE/JPEG; q=1", pngB, []string{`"upload"`, "media type image/jpeg", "JPEG", "a PNG image"}},
		{"upload", "application/pdf", []byte("{}"), []string{"PDF", "JSON"}},
	}
	for _, c := range refused {
		err := Check(c.name, c.mediaType, ClassifyBytes(c.name, c.mediaType, c.data))
		if err == nil {
			t.Errorf("Check(%q, %q) accepted fake content", c.name, c.mediaType)
			continue
		}
		if code := desk.ErrorCode(err); code != desk.EINVALID {
			t.Errorf("Check(%q): code %q, want %q", c.name, code, desk.EINVALID)
		}
		var de *desk.Error
		if !errors.As(err, &de) {
			t.Errorf("Check(%q): %T is not *desk.Error", c.name, err)
			continue
		}
		for _, s := range c.contains {
			if !strings.Contains(de.Message, s) {
				t.Errorf("Check(%q): message %q lacks %q", c.name, de.Message, s)
			}
		}
	}

	accepted := []struct {
		name, mediaType string
		data            []byte
	}{
		{"empty.pdf", "", nil},
		{"empty.png", "image/png", nil},
		{"a.png", "image/png", pngB},
		{"a.JPG", "", jpegB},
		{"a.jpeg", "image/jpeg", jpegB},
		{"r.pdf", "application/pdf", pdfB},
		{"b.xlsx", kinds[XLSX].mediaType, xlsx},
		{"d.docx", "", docx},
		{"notes.txt", "text/plain", []byte("hi")},
		{"data.csv", "", plainZip}, // CSV is not a strict claim
	}
	for _, c := range accepted {
		if err := Check(c.name, c.mediaType, ClassifyBytes(c.name, c.mediaType, c.data)); err != nil {
			t.Errorf("Check(%q, %q) refused real content: %v", c.name, c.mediaType, err)
		}
	}
}

// countingReaderAt serves size bytes from gen without holding them, and
// counts how many bytes it handed out.
type countingReaderAt struct {
	size int64
	at   func(off int64) byte
	read atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), c.size-off)
	for i := range n {
		p[i] = c.at(off + i)
	}
	c.read.Add(n)
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// countingBytes counts reads from an in-memory slice.
type countingBytes struct {
	r    *bytes.Reader
	read atomic.Int64
}

func (c *countingBytes) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.read.Add(int64(n))
	return n, err
}

func TestBoundedReads(t *testing.T) {
	const slack = 4 << 10

	t.Run("text", func(t *testing.T) {
		r := &countingReaderAt{size: 50 << 20, at: func(int64) byte { return 'a' }}
		res, err := Classify("big.txt", "", r, r.size)
		if err != nil || res.Kind != Text {
			t.Fatalf("got %+v, %v", res, err)
		}
		if n := r.read.Load(); n > HeadSize+slack {
			t.Errorf("read %d bytes of a %d-byte text file", n, r.size)
		}
	})

	t.Run("json-prefix", func(t *testing.T) {
		// Above 8 MiB only the head is checked, so a broken tail is unseen.
		r := &countingReaderAt{size: 20 << 20, at: func(off int64) byte {
			if off == 0 {
				return '['
			}
			if off%2 == 1 {
				return '1'
			}
			return ','
		}}
		res, err := Classify("big.json", "", r, r.size)
		if err != nil || res.Kind != JSON {
			t.Fatalf("got %+v, %v", res, err)
		}
		if n := r.read.Load(); n > HeadSize+slack {
			t.Errorf("read %d bytes of a %d-byte JSON file", n, r.size)
		}
	})

	for _, tc := range []struct {
		kind  string
		names []string
	}{
		{ZIP, []string{"big.bin", "other.bin"}},
		{XLSX, []string{"xl/worksheets/sheet1.xml", "xl/workbook.xml"}},
	} {
		t.Run("stored-"+tc.kind, func(t *testing.T) {
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
			for _, name := range tc.names {
				w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
				if err != nil {
					t.Fatal(err)
				}
				for range 10 {
					w.Write(chunk)
				}
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			r := &countingBytes{r: bytes.NewReader(buf.Bytes())}
			size := int64(buf.Len())
			res, err := Classify("archive", "", r, size)
			if err != nil || res.Kind != tc.kind {
				t.Fatalf("got %+v, %v", res, err)
			}
			if n := r.read.Load(); n > 2*HeadSize+slack {
				t.Errorf("read %d bytes of a %d-byte stored zip", n, size)
			}
		})
	}
}

func TestJSONSizes(t *testing.T) {
	// Between HeadSize and 8 MiB the whole file is validated.
	body := "[" + strings.Repeat(`"abcdefgh",`, 20000) + `"end"]`
	if got := ClassifyBytes("", "", []byte(body)).Kind; got != JSON {
		t.Errorf("valid 200 KiB JSON: %s", got)
	}
	broken := "[" + strings.Repeat(`"abcdefgh",`, 20000) + `"end"`
	if got := ClassifyBytes("", "", []byte(broken)).Kind; got != Text {
		t.Errorf("unterminated 200 KiB JSON: %s, want text", got)
	}
	// Above 8 MiB a valid head is enough, even with a broken tail.
	huge := "[" + strings.Repeat(`"abcdefgh",`, 900000) + `oops`
	if got := ClassifyBytes("", "", []byte(huge)).Kind; got != JSON {
		t.Errorf("9 MiB JSON prefix: %s, want json", got)
	}
	if got := ClassifyBytes("", "", []byte("[1, 2,, "+strings.Repeat(" ", 9<<20))).Kind; got != Text {
		t.Errorf("9 MiB file with a broken JSON head: %s, want text", got)
	}
}

func TestCutRuneAtHeadBoundary(t *testing.T) {
	// "é" straddles the end of the head; the file is still valid text.
	b := append(bytes.Repeat([]byte("a"), HeadSize-1), "é and more"...)
	if got := ClassifyBytes("", "", b).Kind; got != Text {
		t.Errorf("rune cut by the head: %s, want text", got)
	}
	// The same cut at the real end of the file is invalid UTF-8.
	if got := ClassifyBytes("", "", b[:HeadSize]).Kind; got != Binary {
		t.Errorf("rune cut by the end of file: %s, want binary", got)
	}
}

type failingReaderAt struct{}

var errDisk = errors.New("disk on fire")

func (failingReaderAt) ReadAt(p []byte, off int64) (int, error) { return 0, errDisk }

// zipThenFail serves the first bytes of a ZIP and fails beyond them, so the
// central directory read is what breaks.
type zipThenFail struct{ head []byte }

func (z zipThenFail) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) <= int64(len(z.head)) {
		return copy(p, z.head[off:]), nil
	}
	return 0, errDisk
}

func TestIOErrors(t *testing.T) {
	if _, err := Classify("x", "", failingReaderAt{}, 100); !errors.Is(err, errDisk) {
		t.Errorf("head read failure: %v", err)
	}
	big := make([]byte, HeadSize*2)
	copy(big, "PK\x03\x04")
	if _, err := Classify("x", "", zipThenFail{head: big[:HeadSize]}, int64(len(big))); !errors.Is(err, errDisk) {
		t.Errorf("zip directory read failure: %v", err)
	}
	// A reader shorter than the promised size is classified by what it has.
	res, err := Classify("x", "", bytes.NewReader([]byte("hello")), 1000)
	if err != nil || res.Kind != Text {
		t.Errorf("short reader: %+v, %v", res, err)
	}
}

var knownKinds = []string{Empty, PDF, XLSX, DOCX, PPTX, ZIP, PNG, JPEG, GIF, WebP,
	JSON, HTML, SVG, CSV, TSV, Markdown, Text, Binary}

func FuzzClassify(f *testing.F) {
	for _, fx := range fixtures(f) {
		f.Add(fx.name, fx.mediaType, fx.data)
	}
	known := map[string]bool{}
	for _, k := range knownKinds {
		known[k] = true
	}
	f.Fuzz(func(t *testing.T, name, mediaType string, data []byte) {
		res := ClassifyBytes(name, mediaType, data)
		if !known[res.Kind] {
			t.Fatalf("unknown kind %q", res.Kind)
		}
		switch res.Kind {
		case PDF, ZIP, XLSX, DOCX, PPTX:
			if res.Text {
				t.Fatalf("%s classified as text", res.Kind)
			}
		}
		if res.Text != wantText[res.Kind] || res.Preview != wantPreview[res.Kind] || res.MediaType == "" {
			t.Fatalf("inconsistent result %+v", res)
		}
		if res.Text && len(data) <= HeadSize && bytes.IndexByte(data, 0) >= 0 {
			t.Fatalf("text result for bytes with NUL: %+v", res)
		}
		// Check must never panic and must only ever return EINVALID.
		if err := Check(name, mediaType, res); err != nil && desk.ErrorCode(err) != desk.EINVALID {
			t.Fatalf("Check returned %v", err)
		}
	})
}
