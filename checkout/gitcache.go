package checkout

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/desk-runtime/desk"
)

// GitReader answers ReadGit for many work trees without reading git on
// every request: GET of a session names its branch, and reading .git
// (checkRepo's checks, then HEAD) was half the cost of that request.
//
// An answer is kept with the identity and change time of the two files it
// came from — the work tree's .git and the HEAD that was read — and is
// reused only while a lstat of each still shows the same file unchanged:
// the same device and inode, mode, size, mtime and ctime. Git moves a new
// HEAD into place (a new inode), an agent writing HEAD in place changes
// its ctime (which no caller can set), and replacing .git or any directory
// on the way to HEAD with a link changes what lstat finds; each makes the
// next Read check and read again from the start, with ReadGit's rules.
// Only positive answers are kept: a work tree without git costs one lstat.
// The zero value is ready to use.
type GitReader struct {
	mu sync.Mutex
	m  map[string]gitEntry
}

// maxGitEntries bounds the reader's memory: past it, the table starts
// afresh (an answer is cheap to read again).
const maxGitEntries = 4096

type gitEntry struct {
	dotGit, head stamp
	headPath     string
	info         desk.GitInfo
}

// stamp is what lstat says of a file that an unchanged file keeps.
type stamp struct {
	dev, ino, size uint64
	mode           uint32
	mtime, ctime   int64
}

func stampOf(fi os.FileInfo) (stamp, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{}, false
	}
	return stamp{
		dev: uint64(st.Dev), ino: uint64(st.Ino), size: uint64(st.Size), mode: uint32(st.Mode),
		mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec, ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec,
	}, true
}

func lstamp(p string) (stamp, bool) {
	fi, err := os.Lstat(p)
	if err != nil {
		return stamp{}, false
	}
	return stampOf(fi)
}

// Read is ReadGit(dir), from the table when dir's .git and HEAD are
// unchanged since they were read.
func (c *GitReader) Read(dir string) (desk.GitInfo, bool) {
	dir = filepath.Clean(dir)
	dotGit, ok := lstamp(filepath.Join(dir, ".git"))
	if !ok {
		c.forget(dir)
		return desk.GitInfo{}, false
	}
	c.mu.Lock()
	e, hit := c.m[dir]
	c.mu.Unlock()
	if hit && e.dotGit == dotGit {
		if h, ok := lstamp(e.headPath); ok && h == e.head {
			return e.info, true
		}
	}
	info, headPath, head, ok := readGit(dir)
	if !ok {
		c.forget(dir)
		return desk.GitInfo{}, false
	}
	// .git is stamped before it was checked and read: a change in between
	// leaves a stamp that the next Read does not match, so it reads again.
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxGitEntries {
		c.m = make(map[string]gitEntry)
	}
	c.m[dir] = gitEntry{dotGit: dotGit, head: head, headPath: headPath, info: info}
	c.mu.Unlock()
	return info, true
}

func (c *GitReader) forget(dir string) {
	c.mu.Lock()
	delete(c.m, dir)
	c.mu.Unlock()
}

// ReadGit reads the branch of the work tree dir from its HEAD; ok is false
// when dir is not a git work tree.
func ReadGit(dir string) (desk.GitInfo, bool) {
	info, _, _, ok := readGit(dir)
	return info, ok
}

// readGit is ReadGit that also says which HEAD it read and that file's
// stamp, taken from the open file, so the stamp is of what was read.
func readGit(dir string) (desk.GitInfo, string, stamp, bool) {
	// The sandboxed agent writes /workspace/.git: a .git file naming any
	// directory on the host would otherwise have desk read that
	// directory's HEAD (another workspace's branch, say) into a session
	// the agent can read. Only a repository desk made is read, as for
	// running git (checkRepo), and HEAD is read without following a link.
	g, err := checkRepo(dir)
	if err != nil {
		return desk.GitInfo{}, "", stamp{}, false
	}
	headPath := filepath.Join(g, "HEAD")
	f, err := os.OpenFile(headPath, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return desk.GitInfo{}, "", stamp{}, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return desk.GitInfo{}, "", stamp{}, false
	}
	st, ok := stampOf(fi)
	if !ok {
		return desk.GitInfo{}, "", stamp{}, false
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return desk.GitInfo{}, "", stamp{}, false
	}
	head := strings.TrimSpace(string(b))
	if ref, ok := strings.CutPrefix(head, "ref:"); ok {
		return desk.GitInfo{Branch: strings.TrimPrefix(strings.TrimSpace(ref), "refs/heads/")}, headPath, st, true
	}
	return desk.GitInfo{Detached: true, Commit: head}, headPath, st, true
}
