package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk/store/postgres/pgtest"
)

// TestLoginLinkAcrossNodes: two desk serve nodes on one Postgres database
// with separate homes. A login link made on A is exchanged on B, once;
// the same code is refused on either node afterwards.
func TestLoginLinkAcrossNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("two-node test: skipped in -short mode")
	}
	env := []string{"DESK_POSTGRES=" + pgtest.DSN(t)}
	dir := t.TempDir()
	a := startDesk(t, deskOpts{Home: filepath.Join(dir, "a"), Token: "links", Env: env})
	b := startDesk(t, deskOpts{Home: filepath.Join(dir, "b"), Token: "links", Env: env})

	var link struct{ URL string }
	if code := a.call("POST", "/v1/admin/login-links", nil, &link); code != 201 {
		t.Fatalf("issue on A = %d", code)
	}
	m := loginLinkRE.FindStringSubmatch(link.URL)
	if m == nil || !strings.HasPrefix(link.URL, a.URL) {
		t.Fatalf("link %q: want one on A's address", link.URL)
	}
	onB := b.URL + "/login?code=" + m[2]
	if signIn(t, onB) == nil {
		t.Fatal("B refused a link A issued")
	}
	if signIn(t, onB) != nil {
		t.Fatal("B exchanged the same link twice")
	}
	if signIn(t, link.URL) != nil {
		t.Fatal("A exchanged a link B had already exchanged")
	}
}
