package web

import (
	"archive/zip"
	"bytes"
	"fmt"
	"testing"

	"github.com/xuri/excelize/v2"
)

// The preview tests' documents are made here, by the libraries and formats
// a user's files come from, not checked in as opaque blobs.

// TwoPagePDF is a valid two-page PDF: a black square on page 1 and a red
// one on page 2, with a correct cross-reference table.
func TwoPagePDF() []byte {
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 5 0 R] /Count 2 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R /Resources << >> >>",
		stream("0 0 0 rg 20 20 160 160 re f"),
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 6 0 R /Resources << >> >>",
		stream("1 0 0 rg 50 50 100 100 re f"),
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

func stream(s string) string {
	return fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(s), s)
}

// Workbook is an xlsx written by excelize with two sheets.
func Workbook(t testing.TB, rows int) []byte {
	f := excelize.NewFile()
	defer f.Close()
	if err := f.SetSheetName("Sheet1", "Regions"); err != nil {
		t.Fatal(err)
	}
	for i, row := range [][]any{{"Region", "Q1", "Q2"}, {"North", 10, 14}, {"South", 8, 11}} {
		if err := f.SetSheetRow("Regions", fmt.Sprintf("A%d", i+1), &row); err != nil {
			t.Fatal(err)
		}
	}
	for i := 4; i <= rows; i++ {
		if err := f.SetCellValue("Regions", fmt.Sprintf("A%d", i), fmt.Sprintf("row %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.NewSheet("Notes"); err != nil {
		t.Fatal(err)
	}
	b, err := f.WriteToBuffer()
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// WordDocument is a minimal docx: a Title, a Heading2 and two paragraphs,
// one with a tab and a line break inside it.
func WordDocument(t testing.TB) []byte {
	const doc = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>
<w:p><w:pPr><w:pStyle w:val="Title"/></w:pPr><w:r><w:t>Launch plan</w:t></w:r></w:p>
<w:p><w:pPr><w:pStyle w:val="Heading2"/></w:pPr><w:r><w:t>Goals</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">Ship the </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>beta</w:t></w:r><w:r><w:tab/><w:t>soon</w:t><w:br/><w:t>then GA.</w:t></w:r></w:p>
<w:p></w:p>
<w:p><w:r><w:t>&lt;script&gt;alert(1)&lt;/script&gt;</w:t></w:r></w:p>
</w:body></w:document>`
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, body := range map[string]string{
		"[Content_Types].xml": `<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`,
		"word/document.xml":   doc,
	} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The PawWork JSON kinds, as Univer and tldraw write them.
const (
	UniverWorkbook = `{"id":"wb1","name":"Budget","sheetOrder":["s2","s1"],"sheets":{
		"s1":{"name":"Other","cellData":{"0":{"0":{"v":"not first"}}}},
		"s2":{"name":"Budget","cellData":{"0":{"0":{"v":"Item"},"1":{"v":"Cost"}},"1":{"0":{"v":"Laptops"},"1":{"v":1200}},"3":{"1":{"v":true}}}}}}`
	UniverDocument = `{"id":"d1","body":{"dataStream":"Minutes\rAttendees: Ana, Bo\r\n","paragraphs":[
		{"startIndex":7,"paragraphStyle":{"namedStyleType":"HEADING_1"}},{"startIndex":25}]}}`
	PawCanvas    = `{"pawCanvas":1,"shapes":[{"type":"rect"},{"type":"arrow"},{"type":"rect"}]}`
	TldrawCanvas = `{"store":{"shape:a":{"typeName":"shape","type":"geo"},"page:p":{"typeName":"page"}},"schema":{"schemaVersion":2}}`
	PawSite      = `<!doctype html><html data-paw-kind="site"><body><h1 id="hello">Hello site</h1></body></html>`
)
