package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCommitReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "f.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(root, "a/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	if _, err := f.Write([]byte("new contents")); err != nil {
		t.Fatal(err)
	}
	// Before the commit readers still see the old bytes.
	if b, _ := os.ReadFile(filepath.Join(dir, "a", "f.txt")); string(b) != "old" {
		t.Fatalf("before commit: %q", b)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a", "f.txt")); string(b) != "new contents" {
		t.Fatalf("after commit: %q", b)
	}
	assertNoTemp(t, filepath.Join(dir, "a"))
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	f, err := Create(root, "deep/er/f.bin")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("partial"))
	f.Abort()
	if _, err := os.Stat(filepath.Join(dir, "deep/er/f.bin")); !os.IsNotExist(err) {
		t.Fatalf("target exists after abort: %v", err)
	}
	assertNoTemp(t, filepath.Join(dir, "deep/er"))
}

func TestCreateRefusesEscape(t *testing.T) {
	dir := t.TempDir()
	root, _ := os.OpenRoot(filepath.Join(dir))
	defer root.Close()
	if _, err := Create(root, "../outside.txt"); err == nil {
		t.Fatal("created a file outside the root")
	}
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if IsTemp(e.Name()) {
			t.Fatalf("temporary file left behind: %s", e.Name())
		}
	}
}

// A sweep (TryLock) cannot take a temporary file while its writer holds
// it: from Create, through Close (bytes durable, the rename recorded
// elsewhere), until Keep, Commit or Abort; and can take it after Keep.
func TestWriterHoldsItsTemporaryFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	f, err := Create(root, "a/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.FromSlash(f.Temp))
	if _, ok := TryLock(p); ok {
		t.Fatal("a file being written was taken")
	}
	f.Write([]byte("x"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := TryLock(p); ok {
		t.Fatal("a closed, not yet claimed file was taken")
	}
	f.Keep()
	unlock, ok := TryLock(p)
	if !ok {
		t.Fatal("a kept file is still locked")
	}
	unlock()
	// A link made by LinkTemp shares the lock of its source.
	l, err := LinkTemp(root, f.Temp, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := TryLock(filepath.Join(dir, filepath.FromSlash(l.Temp))); ok {
		t.Fatal("a linked temporary file was taken")
	}
	l.Abort()
	if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(l.Temp))); !os.IsNotExist(err) {
		t.Fatalf("Abort left the link: %v", err)
	}
}
