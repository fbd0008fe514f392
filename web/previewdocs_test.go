package web

import (
	"archive/zip"
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/desk-runtime/desk/classify"
)

func TestPreviewFixturesClassify(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		kind string
	}{
		{"a.pdf", TwoPagePDF(), "pdf"},
		{"a.xlsx", Workbook(t, 3), "xlsx"},
		{"a.docx", WordDocument(t), "docx"},
		{"a.json", []byte(UniverWorkbook), classify.JSONWorkbook},
		{"b.json", []byte(UniverDocument), classify.JSONDocument},
		{"c.json", []byte(PawCanvas), classify.JSONCanvas},
		{"d.json", []byte(TldrawCanvas), classify.JSONCanvas},
		{"e.html", []byte(PawSite), classify.HTMLSite},
	} {
		if got := classify.ClassifyBytes(c.name, "", c.b).Kind; got != c.kind {
			t.Errorf("%s: %s, want %s", c.name, got, c.kind)
		}
	}
}

func TestXLSXTable(t *testing.T) {
	tb, err := xlsxTable(bytes.NewReader(Workbook(t, 3)))
	if err != nil {
		t.Fatal(err)
	}
	if tb.Sheet != "Regions" || tb.Sheets != 2 || tb.More {
		t.Errorf("table = %+v", tb)
	}
	if got := fmt.Sprint(tb.Rows); got != "[[Region Q1 Q2] [North 10 14] [South 8 11]]" {
		t.Errorf("rows = %s", got)
	}
	big, err := xlsxTable(bytes.NewReader(Workbook(t, 500)))
	if err != nil {
		t.Fatal(err)
	}
	if len(big.Rows) != previewRows || !big.More {
		t.Errorf("500-row sheet: %d rows, more %v", len(big.Rows), big.More)
	}
	if _, err := xlsxTable(bytes.NewReader(WordDocument(t))); err == nil {
		t.Error("a docx read as a workbook")
	}
}

func TestCSVTable(t *testing.T) {
	tb, err := csvTable(strings.NewReader("a,b\n\"x, y\",2\n"+strings.Repeat("1,", 80)+"1\n"), ',')
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Rows) != 3 || tb.Rows[1][0] != "x, y" || len(tb.Rows[2]) != previewCols || !tb.More {
		t.Errorf("table = %+v", tb)
	}
	tsv, err := csvTable(strings.NewReader("k\tv\nname\t"+strings.Repeat("é", 600)+"\n"), '\t')
	if err != nil {
		t.Fatal(err)
	}
	if c := tsv.Rows[1][1]; !strings.HasSuffix(c, "…") || len([]rune(c)) != previewCellText+1 {
		t.Errorf("long cell not clipped: %d runes", len([]rune(c)))
	}
}

func TestDocxParas(t *testing.T) {
	paras, more, err := docxParas(bytes.NewReader(WordDocument(t)), int64(len(WordDocument(t))))
	if err != nil {
		t.Fatal(err)
	}
	want := []para{{1, "Launch plan"}, {2, "Goals"}, {0, "Ship the beta\tsoon\nthen GA."}, {0, "<script>alert(1)</script>"}}
	if more || fmt.Sprint(paras) != fmt.Sprint(want) {
		t.Errorf("paras = %v, more %v; want %v", paras, more, want)
	}
	// A package without word/document.xml, and one whose document part is
	// a bomb of one huge paragraph: an error, or a bounded read.
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("word/other.xml")
	w.Write([]byte("<x/>"))
	zw.Close()
	if _, _, err := docxParas(bytes.NewReader(b.Bytes()), int64(b.Len())); err == nil || !strings.Contains(err.Error(), "word/document.xml") {
		t.Errorf("missing part: %v", err)
	}
	b.Reset()
	zw = zip.NewWriter(&b)
	w, _ = zw.Create("word/document.xml")
	w.Write([]byte("<w:document xmlns:w=\"w\"><w:body>"))
	for range 5000 {
		w.Write([]byte("<w:p><w:r><w:t>paragraph</w:t></w:r></w:p>"))
	}
	w.Write([]byte("</w:body></w:document>"))
	zw.Close()
	paras, more, err = docxParas(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil || len(paras) != previewParas || !more {
		t.Errorf("5000 paragraphs: %d, more %v, %v", len(paras), more, err)
	}
}

func TestPawWorkPreviews(t *testing.T) {
	tb, err := workbookTable([]byte(UniverWorkbook))
	if err != nil {
		t.Fatal(err)
	}
	if tb.Sheet != "Budget" || tb.Sheets != 2 || fmt.Sprintf("%q", tb.Rows) != `[["Item" "Cost"] ["Laptops" "1200"] ["" ""] ["" "true"]]` {
		t.Errorf("workbook = %+v %q", tb, tb.Rows)
	}
	if _, err := workbookTable([]byte(`{"sheets":{},"sheetOrder":["gone"]}`)); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("missing sheet: %v", err)
	}
	paras, _, err := documentParas([]byte(UniverDocument))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(paras) != fmt.Sprint([]para{{1, "Minutes"}, {0, "Attendees: Ana, Bo"}}) {
		t.Errorf("document = %v", paras)
	}
	c, err := canvasSummary([]byte(PawCanvas))
	if err != nil || c.Format != "PawWork canvas" || c.Shapes != 3 || strings.Join(c.Kinds, ",") != "rect,arrow" {
		t.Errorf("canvas = %+v, %v", c, err)
	}
	c, err = canvasSummary([]byte(TldrawCanvas))
	if err != nil || c.Format != "tldraw snapshot" || c.Shapes != 1 || strings.Join(c.Kinds, ",") != "geo" {
		t.Errorf("tldraw = %+v, %v", c, err)
	}
	for kind, want := range map[string]string{"xlsx": "table", "csv": "table", classify.JSONWorkbook: "table",
		"docx": "doc", classify.JSONDocument: "doc", classify.JSONCanvas: "canvas", classify.HTMLSite: "site", "json": "text", "pptx": "card"} {
		if got := previewMode(kind); got != want {
			t.Errorf("previewMode(%s) = %s, want %s", kind, got, want)
		}
	}
}
