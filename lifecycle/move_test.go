package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// describe lists every entry under dir with its type, mode, content or
// link target, and which entries share an inode.
func describe(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	inodes := map[uint64][]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			lines = append(lines, fmt.Sprintf("%s dir %v %d", rel, fi.Mode(), fi.ModTime().UnixNano()))
		case fi.Mode()&fs.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			lines = append(lines, fmt.Sprintf("%s link %s", rel, tgt))
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("%s file %v %d %q", rel, fi.Mode(), fi.ModTime().UnixNano(), b))
			st := fi.Sys().(*syscall.Stat_t)
			inodes[st.Ino] = append(inodes[st.Ino], rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range inodes {
		if len(names) > 1 {
			sort.Strings(names)
			lines = append(lines, "linked "+strings.Join(names, " "))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func sampleTree(t *testing.T, dir string) {
	t.Helper()
	for _, step := range []error{
		os.MkdirAll(filepath.Join(dir, "checkout", "private"), 0o755),
		os.WriteFile(filepath.Join(dir, "checkout", "run.sh"), []byte("#!/bin/sh\n"), 0o755),
		os.WriteFile(filepath.Join(dir, "checkout", "private", "key"), []byte("k"), 0o600),
		os.Chmod(filepath.Join(dir, "checkout", "private", "key"), 0o600),
		os.Chmod(filepath.Join(dir, "checkout", "private"), 0o700),
		os.Symlink("run.sh", filepath.Join(dir, "checkout", "link")),
		os.WriteFile(filepath.Join(dir, "item"), []byte("item bytes"), 0o644),
		os.MkdirAll(filepath.Join(dir, "groups", "g"), 0o755),
		os.Link(filepath.Join(dir, "item"), filepath.Join(dir, "groups", "g", "item")),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
}

// crossDevice makes every rename of a directory fail as it does across
// file systems, so moves take the copy path.
func crossDevice(t *testing.T) {
	t.Helper()
	rename = func(from, to string) error {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EXDEV}
	}
	t.Cleanup(func() { rename = os.Rename })
}

func TestMoveDirRename(t *testing.T) {
	base := t.TempDir()
	src, dst := filepath.Join(base, "a", "ws"), filepath.Join(base, "b", "ws")
	sampleTree(t, src)
	want := describe(t, src)
	if err := moveDir(src, dst, func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := describe(t, dst); got != want {
		t.Fatalf("moved tree differs:\n%s\nwant:\n%s", got, want)
	}
	if _, err := os.Lstat(src); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the source is still there")
	}
	// Again: done already.
	if err := moveDir(src, dst, func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := moveDir(filepath.Join(base, "x"), filepath.Join(base, "y"), func(string) error { return nil }); err == nil {
		t.Fatal("moving nothing succeeded")
	}
}

// TestMoveDirAcrossFileSystems: the copy keeps modes, times, links and
// hard links; a move interrupted after the copy, or after the copy was
// renamed into place with both directories present, finishes when run
// again.
func TestMoveDirAcrossFileSystems(t *testing.T) {
	crossDevice(t)
	for _, stop := range []string{"", "copied", "renamed"} {
		t.Run("stop="+stop, func(t *testing.T) {
			base := t.TempDir()
			src, dst := filepath.Join(base, "a", "ws"), filepath.Join(base, "b", "ws")
			sampleTree(t, src)
			want := describe(t, src)
			crash := errors.New("crash")
			err := moveDir(src, dst, func(step string) error {
				if step == stop {
					return crash
				}
				return nil
			})
			if stop == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if !errors.Is(err, crash) {
					t.Fatalf("move = %v, want the injected crash", err)
				}
				if _, err := os.Lstat(src); err != nil {
					t.Fatal("the source went before the copy was in place")
				}
				if stop == "renamed" {
					if _, err := os.Lstat(dst); err != nil {
						t.Fatal("both directories should exist")
					}
				}
				if err := moveDir(src, dst, func(string) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if got := describe(t, dst); got != want {
				t.Fatalf("moved tree differs:\n%s\nwant:\n%s", got, want)
			}
			for _, gone := range []string{src, partialOf(dst)} {
				if _, err := os.Lstat(gone); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("%s is still there", gone)
				}
			}
		})
	}
}
