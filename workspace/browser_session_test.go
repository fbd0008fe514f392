package workspace_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/store/sqlite"
	"github.com/desk-runtime/desk/workspace"
)

// TestBrowserSessionEndsWithItsToken: a browser session stands for the
// token it was made from; once that token no longer signs in (the admin
// token changed between runs), the session opens nothing and its row is
// gone, while a session of the current token works.
func TestBrowserSessionEndsWithItsToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "desk.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	old := workspace.NewBrowserSessions(st, "deskadm_old", nil)
	id, p, err := old.Start(ctx, "deskadm_old")
	if err != nil || !p.Admin || !strings.HasPrefix(id, workspace.BrowserSessionPrefix) || strings.Contains(id, "deskadm_old") {
		t.Fatalf("Start = %q %+v %v", id, p, err)
	}
	if _, _, err := old.Start(ctx, "deskadm_wrong"); desk.ErrorCode(err) != desk.EUNAUTHORIZED {
		t.Fatalf("Start with a wrong token = %v, want unauthorized", err)
	}
	// The id is no token: the workspace service does not know it.
	if _, err := workspace.New(st, layout.Home{Root: t.TempDir()}, "deskadm_old").Authenticate(ctx, id); desk.ErrorCode(err) != desk.EUNAUTHORIZED {
		t.Fatalf("the id as a bearer token = %v, want unauthorized", err)
	}

	// The next run has another admin token.
	cur := workspace.NewBrowserSessions(st, "deskadm_new", nil)
	if _, err := cur.Authenticate(ctx, id); desk.ErrorCode(err) != desk.EUNAUTHORIZED {
		t.Fatalf("a session of the old admin token = %v, want unauthorized", err)
	}
	if _, err := st.GetBrowserSession(ctx, workspace.HashToken(id)); desk.ErrorCode(err) != desk.ENOTFOUND {
		t.Fatalf("the stale row stayed: %v", err)
	}
	fresh, _, err := cur.Start(ctx, "deskadm_new")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := cur.Authenticate(ctx, fresh); err != nil || !p.Admin {
		t.Fatalf("a session of the current token = %+v %v", p, err)
	}
	// Not even a well-formed unknown id, or no id, opens anything.
	for _, bad := range []string{"", workspace.BrowserSessionPrefix + strings.Repeat("a", 52), "deskadm_new"} {
		if _, err := cur.Authenticate(ctx, bad); desk.ErrorCode(err) != desk.EUNAUTHORIZED {
			t.Fatalf("Authenticate(%q) = %v, want unauthorized", bad, err)
		}
	}
}
