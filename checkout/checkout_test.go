package checkout

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

func openRoot(t *testing.T) (*os.Root, string) {
	t.Helper()
	dir := t.TempDir()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir
}

func put(t *testing.T, dir, p, c string, mode os.FileMode) {
	t.Helper()
	f := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte(c), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f, mode); err != nil {
		t.Fatal(err)
	}
}

func opener(contents map[int]string) Opener {
	return func(i int, _ Change) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(contents[i])), nil
	}
}

func TestJournalApplyRollbackKeepsModesAndRemovesNewDirs(t *testing.T) {
	ctx := context.Background()
	root, dir := openRoot(t)
	put(t, dir, "checkout/run.sh", "#!/bin/sh\necho old\n", 0o755)
	put(t, dir, "checkout/gone.txt", "bye\n", 0o600)
	changes := []Change{
		{Path: "checkout/run.sh", SHA256: SHA256([]byte("#!/bin/sh\necho new\n"))},
		{Path: "checkout/gone.txt", Delete: true},
		{Path: "checkout/new/deep/file.txt", SHA256: SHA256([]byte("new\n"))},
	}
	j, err := Begin(ctx, root, "test-op", changes, "", map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	if err := Busy(root, "test-op"); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("busy: %v", err)
	}
	if err := j.Apply(opener(map[int]string{0: "#!/bin/sh\necho new\n", 2: "new\n"}), nil); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "checkout/run.sh")); fi.Mode().Perm() != 0o755 {
		t.Fatalf("replaced file lost its mode: %v", fi.Mode())
	}
	// A reloaded journal undoes it all.
	j2, err := Load(root, "test-op")
	if err != nil || j2 == nil {
		t.Fatalf("load: %v %v", j2, err)
	}
	var data map[string]string
	if err := j2.Decode(&data); err != nil || data["k"] != "v" {
		t.Fatalf("data %v %v", data, err)
	}
	for i := 0; i < 2; i++ { // undoing twice is harmless
		if err := j2.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := j2.Finish(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "checkout/run.sh"))
	fi, _ := os.Stat(filepath.Join(dir, "checkout/run.sh"))
	if string(b) != "#!/bin/sh\necho old\n" || fi.Mode().Perm() != 0o755 {
		t.Fatalf("run.sh = %q %v", b, fi.Mode())
	}
	if fi, err := os.Stat(filepath.Join(dir, "checkout/gone.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("gone.txt not restored: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkout/new")); !os.IsNotExist(err) {
		t.Fatalf("created directory left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, OpsDir)); !os.IsNotExist(err) {
		t.Fatalf("journal left behind: %v", err)
	}
	if j, err := Load(root, "test-op"); err != nil || j != nil {
		t.Fatalf("load after finish: %v %v", j, err)
	}
}

func TestJournalRefusesLinksAndChangedContent(t *testing.T) {
	ctx := context.Background()
	root, dir := openRoot(t)
	outside := t.TempDir()
	put(t, dir, "checkout/real/x.txt", "x", 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "checkout", "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(dir, "checkout", "inside")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"checkout/escape/x.txt", "checkout/inside/x.txt", "checkout/inside", "../x", "/abs", "a/../b"} {
		if _, err := Begin(ctx, root, "test-op", []Change{{Path: p}}, "", nil); err == nil {
			t.Errorf("Begin accepted %s", p)
		}
	}
	// Bytes that are not the planned ones are refused.
	j, err := Begin(ctx, root, "test-op", []Change{{Path: "checkout/a.txt", SHA256: SHA256([]byte("planned"))}}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Apply(opener(map[int]string{0: "something else"}), nil); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("changed content: %v", err)
	}
	if err := j.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkout/a.txt")); !os.IsNotExist(err) {
		t.Fatal("rollback left the refused file")
	}
}

func TestMerge3(t *testing.T) {
	ctx := context.Background()
	base := []byte("a\nb\nc\nd\ne\n")
	merged, clean, err := Merge3(ctx, []byte("A\nb\nc\nd\ne\n"), base, []byte("a\nb\nc\nd\nE\n"))
	if err != nil || !clean || string(merged) != "A\nb\nc\nd\nE\n" {
		t.Fatalf("clean merge: %q %v %v", merged, clean, err)
	}
	merged, clean, err = Merge3(ctx, []byte("a\nX\nc\nd\ne\n"), base, []byte("a\nY\nc\nd\ne\n"))
	if err != nil || clean || !bytes.Contains(merged, []byte("<<<<<<< workspace")) || !bytes.Contains(merged, []byte("||||||| base")) {
		t.Fatalf("conflict: %q %v %v", merged, clean, err)
	}
	_, clean, err = Merge3(ctx, []byte("\x00bin\x01"), []byte("\x00bin\x00"), []byte("\x00bin\x02"))
	if err != nil || clean {
		t.Fatalf("binary merge: clean %v err %v", clean, err)
	}
}

func TestRepoCommitAndResetToUnborn(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	repo := OpenRepo(dir)
	if repo == nil {
		t.Fatal("no repo")
	}
	if OpenRepo(filepath.Join(dir, "sub")) != nil {
		t.Fatal("a directory inside a repository is not the repository")
	}
	put(t, dir, "a.txt", "a", 0o644)
	put(t, dir, "ignored.log", "x", 0o644)
	put(t, dir, ".gitignore", "*.log\n", 0o644)
	put(t, dir, "other.txt", "not ours", 0o644)
	head, err := repo.Head(ctx)
	if err != nil || head != "" {
		t.Fatalf("unborn head %q %v", head, err)
	}
	c, err := repo.Commit(ctx, []string{"a.txt", "ignored.log", "missing.txt"}, "msg\n\n"+OperationTrailer+": op_1\n")
	if err != nil || c == "" {
		t.Fatalf("commit %q %v", c, err)
	}
	if got, ok, err := repo.HeadHasTrailer(ctx, "op_1"); err != nil || !ok || got != c {
		t.Fatalf("trailer: %q %v %v", got, ok, err)
	}
	out, _ := exec.Command("git", "-C", dir, "show", "--name-only", "--format=%an", "HEAD").Output()
	if strings.Fields(string(out))[0] != IdentityName || !strings.Contains(string(out), "a.txt") || strings.Contains(string(out), "other.txt") || strings.Contains(string(out), "ignored.log") {
		t.Fatalf("commit content: %s", out)
	}
	if err := repo.ResetTo(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if head, _ := repo.Head(ctx); head != "" {
		t.Fatalf("head after reset %q", head)
	}
	if staged, _ := repo.StagedPaths(ctx); len(staged) != 0 {
		t.Fatalf("staged after reset %v", staged)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "a" {
		t.Fatal("reset touched the work tree")
	}
}
