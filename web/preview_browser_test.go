package web_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/desk-runtime/desk/web"
)

// TestBrowserPreviews opens every previewed kind in Chromium: a PDF drawn
// by pdf.js (its canvas has ink, and the second page is reachable), an
// xlsx and a PawWork workbook as tables, a docx and a PawWork document as
// text with headings, a canvas as its file card, a site in the sandboxed
// frame; the preview sits beside the list on a wide screen and goes full
// screen; on a phone the drawer shows its count and closes.
func TestBrowserPreviews(t *testing.T) {
	chromium(t)
	s := newSuite(t)
	x := s.f.script(t, "Previews", map[string]any{"text": "ok"})
	up := func(name string, b []byte) {
		s.f.e.Must(201, "POST", "/v1/sessions/"+x.ID+"/artifacts?name="+name, b, nil)
	}
	// The documents are made by the package's own fixtures (exported from
	// its tests): excelize's xlsx, a hand-built docx and PDF, and the
	// PawWork JSON shapes.
	up("deck.pdf", web.TwoPagePDF())
	up("regions.xlsx", web.Workbook(t, 3))
	up("plan.docx", web.WordDocument(t))
	up("budget.json", []byte(web.UniverWorkbook))
	up("minutes.json", []byte(web.UniverDocument))
	up("board.json", []byte(web.PawCanvas))
	up("site.html", []byte(web.PawSite))

	tb := s.tab(t)
	tb.openSession(x)
	open := func(kind string) {
		t.Helper()
		tb.do("open the "+kind, chromedp.Click(chromedp.CSS(`.art[data-kind="`+kind+`"] .art-open`)))
		// The pane holds this artifact's preview, not the one before it.
		tb.wait("the "+kind+" preview", `(() => { const p = document.querySelector("#preview .preview-inner"), a = document.querySelector(`+jsString(`.art[data-kind="`+kind+`"]`)+`);
			return p && a && "art-" + p.dataset.artifact === a.id; })()`)
	}

	// The PDF: pdf.js draws page 1 (non-blank pixels), then page 2.
	open("pdf")
	tb.wait("pdf.js to draw page 1", `document.querySelector("#preview .pdf-view") && document.querySelector("#preview .pdf-view").dataset.state === "rendered"`)
	ink := `(() => { const c = document.querySelector("#preview .pdf-canvas"); const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
		let dark = 0, red = 0; for (let i = 0; i < d.length; i += 4) { if (d[i] < 60 && d[i+1] < 60 && d[i+2] < 60) dark++; if (d[i] > 200 && d[i+1] < 60 && d[i+2] < 60) red++; } return [dark, red, c.width]; })()`
	px := evalJS[[]int](tb, ink)
	if px[0] < 1000 || px[1] != 0 {
		t.Errorf("page 1 pixels: %d dark, %d red (canvas %d px wide); want a black square", px[0], px[1], px[2])
	}
	if got := evalJS[string](tb, `document.querySelector("#preview [data-pdf-pages]").textContent`); got != "2" {
		t.Errorf("page count = %q", got)
	}
	tb.do("next page", chromedp.Click(chromedp.CSS(`#preview [data-pdf-next]`)))
	tb.wait("page 2", `document.querySelector("#preview .pdf-view").dataset.page === "2" && document.querySelector("#preview .pdf-view").dataset.state === "rendered"`)
	if px = evalJS[[]int](tb, ink); px[1] < 1000 {
		t.Errorf("page 2 pixels: %d red; want a red square", px[1])
	}
	// Beside the list, not below it, at 1280×800.
	beside := evalJS[bool](tb, `(() => { const l = document.querySelector(".art-list").getBoundingClientRect(), p = document.querySelector("#preview").getBoundingClientRect(); return p.left >= l.right - 1 && p.top < 400; })()`)
	if !beside {
		t.Error("the preview is not beside the artifact list on a wide screen")
	}
	if os.Getenv("DESK_UI_SCREENSHOTS") == "1" {
		shot, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		writeShot(t, "ui-shelf-pdf.png", shot)
	}
	tb.do("full screen", chromedp.Click(chromedp.CSS(`#preview [data-fullscreen-preview]`)))
	tb.wait("the full-screen preview", `(() => { const r = document.querySelector("#preview").getBoundingClientRect(); return document.querySelector("#preview").classList.contains("fullscreen") && r.width >= window.innerWidth - 2 && r.height >= window.innerHeight - 2; })()`)
	tb.do("Escape", chromedp.KeyEvent(kb.Escape))
	tb.wait("full screen to end", `!document.querySelector("#preview").classList.contains("fullscreen")`)

	cells := func() string {
		return evalJS[string](tb, `[...document.querySelectorAll("#preview table.sheet tr")].map(r => [...r.cells].map(c => c.textContent).join("|")).join("\n")`)
	}
	open("xlsx")
	tb.wait("the xlsx table", `!!document.querySelector("#preview table.sheet td")`)
	if got := cells(); got != "Region|Q1|Q2\nNorth|10|14\nSouth|8|11" {
		t.Errorf("xlsx table:\n%s", got)
	}
	if got := evalJS[string](tb, `document.querySelector("#preview .table-wrap p").textContent`); !strings.Contains(got, "Regions") || !strings.Contains(got, "first of 2") {
		t.Errorf("sheet caption %q", got)
	}
	open("json-workbook")
	tb.wait("the workbook table", `document.querySelector("#preview .preview-inner").dataset.mode === "table" && !!document.querySelector("#preview table.sheet td")`)
	if got := cells(); got != "Item|Cost\nLaptops|1200\n|\n|true" {
		t.Errorf("json-workbook table:\n%s", got)
	}
	open("docx")
	tb.wait("the docx text", `!!document.querySelector("#preview .docview h1")`)
	if h, p := evalJS[string](tb, `document.querySelector("#preview .docview h1").textContent`), evalJS[string](tb, `[...document.querySelectorAll("#preview .docview p")].map(p => p.textContent).join("/")`); h != "Launch plan" || !strings.Contains(p, "beta") || !strings.Contains(p, "<script>") {
		t.Errorf("docx: h1 %q, paragraphs %q", h, p)
	}
	open("json-document")
	tb.wait("the document text", `document.querySelector("#preview .preview-inner").dataset.mode === "doc" && !!document.querySelector("#preview .docview h1")`)
	if h := evalJS[string](tb, `document.querySelector("#preview .docview h1").textContent`); h != "Minutes" {
		t.Errorf("json-document heading %q", h)
	}
	open("json-canvas")
	tb.wait("the canvas card", `document.querySelector("#preview .preview-inner").dataset.mode === "canvas"`)
	if got := evalJS[string](tb, `document.querySelector("#preview .file-card dl").textContent`); !strings.Contains(got, "PawWork canvas") || !strings.Contains(got, "3 (rect, arrow)") {
		t.Errorf("canvas card %q", got)
	}
	open("html-site")
	tb.wait("the site frame", `document.querySelector("#preview .preview-inner").dataset.mode === "site" && !!document.querySelector("#preview iframe.preview-frame")`)
	if sb := evalJS[string](tb, `document.querySelector("#preview iframe").getAttribute("sandbox")`); sb != "allow-scripts" {
		t.Errorf("site frame sandbox %q", sb)
	}

	// A phone: the drawer shows the count, opens, and closes with its own
	// button.
	tb.do("narrow screen", chromedp.EmulateViewport(390, 844), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#composer-text")))
	tb.wait("the count on the drawer toggle", `document.querySelector("#shelf-toggle .count") && document.querySelector("#shelf-toggle .count").textContent === "7"`)
	tb.do("open the drawer", chromedp.Click(chromedp.CSS("#shelf-toggle")))
	tb.wait("the drawer open", `document.body.classList.contains("shelf-open") && document.querySelector(".shelf-close").getBoundingClientRect().width > 0`)
	time.Sleep(300 * time.Millisecond) // the slide-in transition
	if os.Getenv("DESK_UI_SCREENSHOTS") == "1" {
		shot, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		writeShot(t, "ui-mobile-shelf.png", shot)
	}
	tb.do("close the drawer", chromedp.Click(chromedp.CSS(".shelf-close")))
	tb.wait("the drawer closed", `!document.body.classList.contains("shelf-open")`)
	tb.wait("the drawer off screen", `document.querySelector("#shelf-panel").getBoundingClientRect().left >= window.innerWidth - 1`)
}
