package web

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"
)

// Office and PawWork previews are rendered on the server, from the bytes,
// into plain rows and paragraphs the template escapes: the browser runs no
// parser of ours over untrusted documents, and every bound below keeps a
// hostile file (a ZIP bomb, a million columns) from costing more than a
// preview is worth.
const (
	previewRows     = 200       // rows of a table preview
	previewCols     = 50        // columns of a table preview
	previewCellText = 500       // characters kept of one cell
	previewParas    = 2000      // paragraphs of a document preview
	previewDocText  = 512 << 10 // characters of a document preview
	// maxOfficePreview is the largest xlsx or docx previewed: excelize
	// reads the package into memory.
	maxOfficePreview = 32 << 20
	// maxOfficeXML bounds one decompressed part of a package.
	maxOfficeXML = 64 << 20
	// maxJSONPreview is the largest PawWork JSON file previewed.
	maxJSONPreview = 16 << 20
)

// table is the first sheet (or CSV) as rows of cell text.
type table struct {
	Sheet  string
	Sheets int // sheets in the workbook (1 for CSV)
	Rows   [][]string
	// More says rows or columns were left out.
	More bool
}

// para is one paragraph of a document preview; Level 1–6 is a heading.
type para struct {
	Level int
	Text  string
}

func clipCell(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= previewCellText {
		return s
	}
	r := []rune(s)
	return string(r[:previewCellText]) + "…"
}

// csvTable reads the first rows of CSV or TSV text.
func csvTable(r io.Reader, comma rune) (*table, error) {
	cr := csv.NewReader(r)
	cr.Comma, cr.FieldsPerRecord, cr.LazyQuotes, cr.ReuseRecord = comma, -1, true, true
	t := &table{Sheets: 1}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the table: %w", err)
		}
		if len(t.Rows) == previewRows {
			t.More = true
			return t, nil
		}
		t.Rows = append(t.Rows, cutRow(rec, t))
	}
}

func cutRow(rec []string, t *table) []string {
	if len(rec) > previewCols {
		rec, t.More = rec[:previewCols], true
	}
	row := make([]string, len(rec))
	for i, c := range rec {
		row[i] = clipCell(c)
	}
	return row
}

// xlsxTable reads the first rows of an xlsx workbook's first sheet.
func xlsxTable(r io.Reader) (*table, error) {
	f, err := excelize.OpenReader(r, excelize.Options{UnzipSizeLimit: 4 * maxOfficeXML, UnzipXMLSizeLimit: maxOfficeXML})
	if err != nil {
		return nil, fmt.Errorf("opening the workbook: %w", err)
	}
	defer f.Close()
	sheets := f.GetSheetList()
	if len(sheets) == 0 {
		return nil, errors.New("the workbook has no sheets")
	}
	t := &table{Sheet: sheets[0], Sheets: len(sheets)}
	rows, err := f.Rows(sheets[0])
	if err != nil {
		return nil, fmt.Errorf("reading sheet %q: %w", sheets[0], err)
	}
	defer rows.Close()
	for rows.Next() {
		if len(t.Rows) == previewRows {
			t.More = true
			break
		}
		cols, err := rows.Columns()
		if err != nil {
			return nil, fmt.Errorf("reading sheet %q: %w", sheets[0], err)
		}
		t.Rows = append(t.Rows, cutRow(cols, t))
	}
	return t, rows.Error()
}

// docxParas reads a docx's paragraphs from word/document.xml, with the
// Heading1…6 and Title styles as heading levels.
func docxParas(ra io.ReaderAt, size int64) ([]para, bool, error) {
	zr, err := zip.NewReader(ra, size)
	if err != nil {
		return nil, false, fmt.Errorf("opening the document: %w", err)
	}
	var doc *zip.File
	for _, f := range zr.File {
		if strings.EqualFold(f.Name, "word/document.xml") {
			doc = f
		}
	}
	if doc == nil {
		return nil, false, errors.New("the document has no word/document.xml")
	}
	rc, err := doc.Open()
	if err != nil {
		return nil, false, fmt.Errorf("opening word/document.xml: %w", err)
	}
	defer rc.Close()
	dec := xml.NewDecoder(io.LimitReader(rc, maxOfficeXML))
	var (
		out   []para
		cur   *para
		text  strings.Builder
		inT   bool
		total int
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("reading word/document.xml: %w", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			switch el.Name.Local {
			case "p":
				cur = &para{}
				text.Reset()
			case "pStyle":
				if cur != nil {
					cur.Level = headingLevel(attr(el, "val"))
				}
			case "t":
				inT = true
			case "tab":
				text.WriteByte('\t')
			case "br", "cr":
				text.WriteByte('\n')
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "t":
				inT = false
			case "p":
				if cur != nil {
					cur.Text = text.String()
					if strings.TrimSpace(cur.Text) != "" {
						out = append(out, *cur)
						total += len(cur.Text)
					}
					cur = nil
					if len(out) == previewParas || total >= previewDocText {
						return out, true, nil
					}
				}
			}
		case xml.CharData:
			if inT && cur != nil {
				text.Write(el)
			}
		}
	}
}

func attr(el xml.StartElement, local string) string {
	for _, a := range el.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// headingLevel maps a paragraph style to a heading level: Word's
// "Heading1"…"Heading6" and "Title", Univer's HEADING_1…HEADING_6 and TITLE.
func headingLevel(style string) int {
	s := strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(style, "_", ""), " ", ""))
	if s == "title" {
		return 1
	}
	if n, ok := strings.CutPrefix(s, "heading"); ok {
		if l, err := strconv.Atoi(n); err == nil && l >= 1 && l <= 6 {
			return l
		}
	}
	return 0
}

// univerWorkbook is the part of Univer's IWorkbookData a preview reads.
type univerWorkbook struct {
	SheetOrder []string `json:"sheetOrder"`
	Sheets     map[string]struct {
		Name     string                                `json:"name"`
		CellData map[string]map[string]json.RawMessage `json:"cellData"`
	} `json:"sheets"`
}

// workbookTable renders a json-workbook's first sheet (in sheetOrder).
func workbookTable(b []byte) (*table, error) {
	var wb univerWorkbook
	if err := json.Unmarshal(b, &wb); err != nil {
		return nil, fmt.Errorf("reading the workbook: %w", err)
	}
	if len(wb.SheetOrder) == 0 {
		return nil, errors.New("the workbook's sheetOrder is empty")
	}
	sh, ok := wb.Sheets[wb.SheetOrder[0]]
	if !ok {
		return nil, fmt.Errorf("sheet %q of sheetOrder is not in sheets", wb.SheetOrder[0])
	}
	t := &table{Sheet: sh.Name, Sheets: len(wb.SheetOrder)}
	if t.Sheet == "" {
		t.Sheet = wb.SheetOrder[0]
	}
	maxRow, maxCol := -1, -1
	cells := map[[2]int]string{}
	for rs, cols := range sh.CellData {
		r, err := strconv.Atoi(rs)
		if err != nil || r < 0 {
			continue
		}
		for cs, raw := range cols {
			c, err := strconv.Atoi(cs)
			if err != nil || c < 0 {
				continue
			}
			if r >= previewRows || c >= previewCols {
				t.More = true
				continue
			}
			cells[[2]int{r, c}] = cellValue(raw)
			maxRow, maxCol = max(maxRow, r), max(maxCol, c)
		}
	}
	for r := 0; r <= maxRow; r++ {
		row := make([]string, maxCol+1)
		for c := range row {
			row[c] = clipCell(cells[[2]int{r, c}])
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

// cellValue is a Univer cell's shown value: "v", whatever its JSON type.
func cellValue(raw json.RawMessage) string {
	var cell struct {
		V json.RawMessage `json:"v"`
	}
	if json.Unmarshal(raw, &cell) != nil || len(cell.V) == 0 || string(cell.V) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(cell.V, &s) == nil {
		return s
	}
	return string(cell.V)
}

// univerDocument is the part of Univer's IDocumentData a preview reads:
// the text, with "\r" ending each paragraph, and the paragraphs' styles by
// the index of that "\r".
type univerDocument struct {
	Body struct {
		DataStream string `json:"dataStream"`
		Paragraphs []struct {
			StartIndex     int `json:"startIndex"`
			ParagraphStyle struct {
				NamedStyleType json.RawMessage `json:"namedStyleType"`
			} `json:"paragraphStyle"`
		} `json:"paragraphs"`
	} `json:"body"`
}

// documentParas renders a json-document as paragraphs.
func documentParas(b []byte) ([]para, bool, error) {
	var d univerDocument
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, false, fmt.Errorf("reading the document: %w", err)
	}
	styles := map[int]int{}
	for _, p := range d.Body.Paragraphs {
		var name string
		if json.Unmarshal(p.ParagraphStyle.NamedStyleType, &name) == nil {
			styles[p.StartIndex] = headingLevel(name)
		}
	}
	var out []para
	total, start := 0, 0
	// dataStream indexes are UTF-16 code units in Univer; counting runes is
	// exact for text in the Basic Multilingual Plane, the usual case.
	runes := []rune(d.Body.DataStream)
	for i, r := range runes {
		if r != '\r' && r != '\n' {
			continue
		}
		text := string(runes[start:i])
		start = i + 1
		if strings.TrimSpace(text) == "" {
			continue
		}
		out = append(out, para{Level: styles[i], Text: text})
		total += len(text)
		if len(out) == previewParas || total >= previewDocText {
			return out, true, nil
		}
	}
	if rest := strings.TrimSpace(string(runes[start:])); rest != "" {
		out = append(out, para{Text: rest})
	}
	return out, false, nil
}

// canvasInfo is what the file card of a json-canvas says about it.
type canvasInfo struct {
	Format string // "PawWork canvas" or "tldraw snapshot"
	Shapes int
	Kinds  []string // shape types, most common first
}

// canvasSummary counts a canvas's shapes: PawWork's "shapes" array, or a
// tldraw store's "shape:…" records.
func canvasSummary(b []byte) (*canvasInfo, error) {
	var c struct {
		PawCanvas json.RawMessage `json:"pawCanvas"`
		Shapes    []struct {
			Type string `json:"type"`
		} `json:"shapes"`
		Store map[string]struct {
			TypeName string `json:"typeName"`
			Type     string `json:"type"`
		} `json:"store"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("reading the canvas: %w", err)
	}
	info := &canvasInfo{Format: "PawWork canvas"}
	counts := map[string]int{}
	if len(c.PawCanvas) == 0 {
		info.Format = "tldraw snapshot"
		for id, rec := range c.Store {
			if strings.HasPrefix(id, "shape:") || rec.TypeName == "shape" {
				counts[rec.Type]++
				info.Shapes++
			}
		}
	} else {
		for _, s := range c.Shapes {
			counts[s.Type]++
			info.Shapes++
		}
	}
	for k := range counts {
		if k != "" {
			info.Kinds = append(info.Kinds, k)
		}
	}
	sort.Slice(info.Kinds, func(i, j int) bool {
		a, b := info.Kinds[i], info.Kinds[j]
		return counts[a] > counts[b] || counts[a] == counts[b] && a < b
	})
	return info, nil
}

// readBounded reads all of r when it holds at most limit bytes.
func readBounded(r io.Reader, limit int64) ([]byte, bool, error) {
	var b bytes.Buffer
	n, err := io.Copy(&b, io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, err
	}
	if n > limit {
		return nil, false, nil
	}
	return b.Bytes(), true, nil
}
