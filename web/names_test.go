package web_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
)

// TestDuplicateNamesShowIDSuffix: a second workspace named like another is
// refused unless allowed; once two exist, the catalog, the workspace
// switcher and the command palette entries tell them apart by id suffix,
// and a uniquely named workspace shows none.
func TestDuplicateNamesShowIDSuffix(t *testing.T) {
	f := start(t, app.Config{})
	var a, b desk.Workspace
	f.e.Must(201, "POST", "/v1/workspaces", map[string]any{"name": "acme"}, &a)
	if r := f.e.Admin("POST", "/v1/workspaces", map[string]any{"name": "acme"}); r.Status != 409 || !strings.Contains(string(r.Body), a.ID) {
		t.Fatalf("second acme = %d %s; want 409 naming %s", r.Status, r.Body, a.ID)
	}
	f.e.Must(201, "POST", "/v1/workspaces", map[string]any{"name": "acme", "allow_duplicate_name": true}, &b)
	sa, sb := "…"+a.ID[len(a.ID)-3:], "…"+b.ID[len(b.ID)-3:]
	if sa == sb {
		t.Skipf("ids %s and %s end alike; TestIDSuffixes covers longer suffixes", a.ID, b.ID)
	}

	br := signIn(t, f.e)
	page, resp := br.get("/catalog")
	if resp.StatusCode != 200 {
		t.Fatalf("catalog = %d", resp.StatusCode)
	}
	for _, w := range []struct{ id, sfx string }{{a.ID, sa}, {b.ID, sb}} {
		row := regexp.MustCompile(`(?s)<tr data-workspace="` + w.id + `".*?</tr>`).FindString(page)
		if !strings.Contains(row, `<strong>acme</strong> <span class="id-suffix">· `+w.sfx+`</span>`) {
			t.Errorf("catalog row of %s does not show acme · %s:\n%s", w.id, w.sfx, row)
		}
	}
	web := regexp.MustCompile(`(?s)<tr data-workspace="` + f.ws.ID + `".*?</tr>`).FindString(page)
	if web == "" || strings.Contains(web, "id-suffix") {
		t.Errorf("the uniquely named workspace's row shows a suffix (or is missing):\n%s", web)
	}

	// The home page's form: refused without its checkbox, created with it.
	if _, resp := br.post("/workspaces", url.Values{"name": {"web"}}); resp.StatusCode != 409 {
		t.Errorf("form create of a taken name = %d, want 409", resp.StatusCode)
	}
	if _, resp := br.post("/workspaces", url.Values{"name": {"web"}, "allow_duplicate_name": {"1"}}); resp.StatusCode != 204 || !strings.HasPrefix(resp.Header.Get("HX-Redirect"), "/w/ws_") {
		t.Errorf("form create with allow_duplicate_name = %d, redirect %q", resp.StatusCode, resp.Header.Get("HX-Redirect"))
	}

	page, resp = br.get("/w/" + b.ID)
	if resp.StatusCode != 200 {
		t.Fatalf("workspace page = %d", resp.StatusCode)
	}
	for _, want := range []string{
		`data-palette="Workspace: acme · ` + sa + `"`,
		`data-palette="Workspace: acme · ` + sb + `"`,
		`data-palette="Workspace: web · …`,
		`<summary aria-label="Switch workspace">acme · ` + sb + `</summary>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("workspace page lacks %s", want)
		}
	}
}
