package checkout

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/desk-runtime/desk/layout"
)

// The cached reader answers what ReadGit answers after every change the
// agent or git can make: a branch switch, HEAD rewritten in place, and the
// attacks of TestReadGitReadsOnlyRepositoriesDeskMade made after a first,
// remembered read, which must not keep a stale answer nor follow the
// planted file.
func TestGitReaderFollowsChangesAndRefusesPlants(t *testing.T) {
	t.Parallel()
	dir, wt := checkoutWithWorktree(t)
	var c GitReader
	want := func(d, branch string) {
		t.Helper()
		for range 2 { // the read, then the remembered answer
			g, ok := c.Read(d)
			if !ok || g.Branch != branch {
				t.Fatalf("Read(%s) = %+v %v, want branch %q", filepath.Base(d), g, ok, branch)
			}
		}
	}
	want(dir, "main")
	want(wt, "w")

	// git moves a new HEAD into place.
	gitT(t, dir, "checkout", "-q", "-b", "feature")
	want(dir, "feature")
	// Written in place, another length (an agent's echo > .git/HEAD).
	put(t, filepath.Join(dir, ".git"), "HEAD", "ref: refs/heads/in-place-longer-name\n", 0o644)
	want(dir, "in-place-longer-name")

	// Attack after a remembered read: the worktree's .git file retargeted.
	secret := t.TempDir()
	put(t, secret, "HEAD", "ref: refs/heads/another-actors-secret-branch\n", 0o644)
	put(t, wt, ".git", "gitdir: "+secret+"\n", 0o644)
	if g, ok := c.Read(wt); ok {
		t.Fatalf("a .git file naming a foreign directory was read: %+v", g)
	}
	// The worktree's git directory, on HEAD's path, swapped for a link to
	// the foreign directory (the .git file itself untouched).
	put(t, wt, ".git", "gitdir: "+filepath.Join(dir, ".git", "worktrees", "w")+"\n", 0o644)
	want(wt, "w")
	wg := filepath.Join(dir, ".git", "worktrees", "w")
	if err := os.Rename(wg, wg+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, wg); err != nil {
		t.Fatal(err)
	}
	if g, ok := c.Read(wt); ok {
		t.Fatalf("a git directory swapped for a link was read: %+v", g)
	}
	// HEAD replaced by a link to a file elsewhere.
	head := filepath.Join(dir, ".git", "HEAD")
	os.Remove(head)
	if err := os.Symlink(filepath.Join(secret, "HEAD"), head); err != nil {
		t.Fatal(err)
	}
	if g, ok := c.Read(dir); ok {
		t.Fatalf("a HEAD linking elsewhere was followed: %+v", g)
	}
	// .git gone: no git, and nothing remembered.
	if err := os.RemoveAll(filepath.Join(dir, ".git")); err != nil {
		t.Fatal(err)
	}
	if g, ok := c.Read(dir); ok {
		t.Fatalf("a work tree without .git: %+v", g)
	}
	c.mu.Lock()
	n := len(c.m)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d answers remembered for work trees that are no longer git", n)
	}
}

// The table is bounded: reading more work trees than it holds keeps it at
// its bound.
func TestGitReaderIsBounded(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	dir := filepath.Join(ws, layout.CheckoutDir)
	put(t, dir, "a.txt", "a\n", 0o644)
	gitT(t, dir, "init", "-q", "-b", "main")
	var c GitReader
	// Many names for one repository: dir/./, dir/x/.. and so on clean to
	// one key, so distinct keys come from links to the checkout.
	links := t.TempDir()
	for i := range maxGitEntries + 10 {
		l := filepath.Join(links, "l"+strconv.Itoa(i))
		if err := os.Symlink(dir, l); err != nil {
			t.Fatal(err)
		}
		c.Read(l)
	}
	c.mu.Lock()
	n := len(c.m)
	c.mu.Unlock()
	if n == 0 || n > maxGitEntries {
		t.Fatalf("%d entries, want 1..%d", n, maxGitEntries)
	}
}
