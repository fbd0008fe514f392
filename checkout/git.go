package checkout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/desk-runtime/desk"
)

// Identity is the author and committer of every commit desk makes, set
// explicitly so committing works on a machine without a git config.
const (
	IdentityName  = "desk"
	IdentityEmail = "desk@localhost"
)

// OperationTrailer is the trailer naming the operation a commit belongs to.
// Recovery finds it on HEAD to tell a commit that happened from one that
// did not.
const OperationTrailer = "Desk-Operation"

// Repo is a git repository whose work tree is a workspace's checkout. It
// runs the git CLI, so what desk does is what a person at a terminal would
// see.
type Repo struct{ dir string }

// OpenRepo returns the repository of dir when dir has a .git of its own,
// or nil. A checkout that merely sits inside some other repository (a
// DESK_HOME under version control) is not one: desk must never commit to
// a repository it does not own.
func OpenRepo(dir string) *Repo {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err != nil {
		return nil
	}
	return &Repo{dir: dir}
}

// Dir is the work tree.
func (r *Repo) Dir() string { return r.dir }

// GitError is a git command that ran and failed.
type GitError struct {
	Args   []string
	Code   int
	Stderr string
}

func (e *GitError) Error() string {
	return fmt.Sprintf("git %s: exit %d: %s", strings.Join(e.Args, " "), e.Code, strings.TrimSpace(e.Stderr))
}

// Refused turns a git failure (a commit git refused) into a
// conflict the caller sees with git's own words: "git <cmd> failed in
// <where> (exit n), so <outcome>: <stderr>". Other errors pass through.
func Refused(err error, where, outcome string) error {
	var ge *GitError
	if errors.As(err, &ge) {
		msg := strings.TrimSpace(ge.Stderr)
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		return desk.Errorf(desk.ECONFLICT, "git %s failed in %s (exit %d), so %s: %s", ge.Args[0], where, ge.Code, outcome, msg)
	}
	return err
}

func (r *Repo) git(ctx context.Context, args ...string) ([]byte, error) {
	return Git(ctx, r.dir, args...)
}

func literal(p string) string { return ":(literal)" + p }

func splitZ(b []byte) []string {
	var out []string
	for _, s := range strings.Split(string(b), "\x00") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Head returns the commit HEAD points to, or "" in a repository without
// commits.
func (r *Repo) Head(ctx context.Context) (string, error) {
	out, err := r.git(ctx, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if err != nil {
		var ge *GitError
		if errors.As(err, &ge) && ge.Code == 1 {
			return "", nil
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// StagedPaths lists the paths whose staged content differs from HEAD.
func (r *Repo) StagedPaths(ctx context.Context) ([]string, error) {
	out, err := r.git(ctx, "diff", "--cached", "--no-ext-diff", "--no-textconv", "--name-only", "-z")
	if err != nil {
		return nil, err
	}
	return splitZ(out), nil
}

// RefuseStaged answers ECONFLICT when the index holds staged changes: an
// operation that commits must not sweep someone's half-made commit into
// its own.
func (r *Repo) RefuseStaged(ctx context.Context, what string) error {
	staged, err := r.StagedPaths(ctx)
	if err != nil {
		return err
	}
	if len(staged) > 0 {
		shown := staged
		if len(shown) > 10 {
			shown = shown[:10]
		}
		return desk.Errorf(desk.ECONFLICT, "%s has staged changes in its git index (%s); commit or unstage them first", what, strings.Join(shown, ", "))
	}
	return nil
}

// Files lists tracked and untracked, not ignored paths of the work tree
// (the files a person would consider part of the project).
func (r *Repo) Files(ctx context.Context) ([]string, error) {
	out, err := r.git(ctx, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var files []string
	for _, p := range splitZ(out) {
		if !seen[p] {
			seen[p] = true
			files = append(files, p)
		}
	}
	return files, nil
}

// Commit stages exactly paths (additions, changes and deletions) and
// commits them with message, returning the new commit, or "" when the
// paths hold no change. The index must have been clean, so the commit
// holds nothing else. The repository's hooks do not run (see Git), nor
// do its filters: the commit is what desk staged, byte for byte.
func (r *Repo) Commit(ctx context.Context, paths []string, message string) (string, error) {
	var add []string
	for _, p := range paths {
		if _, err := os.Lstat(filepath.Join(r.dir, filepath.FromSlash(p))); err == nil {
			add = append(add, p)
			continue
		}
		// A deletion is staged only for a path git knows.
		out, err := r.git(ctx, "ls-files", "-z", "--", literal(p))
		if err != nil {
			return "", err
		}
		if len(out) > 0 {
			add = append(add, p)
		}
	}
	if len(add) == 0 {
		return "", nil
	}
	// Untracked paths the repository ignores stay out of the commit, as
	// git add would refuse them.
	ignored := map[string]bool{}
	out, err := GitInput(ctx, r.dir, strings.NewReader(strings.Join(add, "\x00")+"\x00"), "check-ignore", "-z", "--stdin")
	if err == nil {
		for _, p := range splitZ(out) {
			ignored[p] = true
		}
	} else {
		var ge *GitError
		if !errors.As(err, &ge) || ge.Code != 1 { // 1: nothing ignored
			return "", err
		}
	}
	args := []string{"add", "-A", "--"}
	n := 0
	for _, p := range add {
		if !ignored[p] {
			args = append(args, literal(p))
			n++
		}
	}
	if n == 0 {
		return "", nil
	}
	if _, err := r.git(ctx, args...); err != nil {
		return "", err
	}
	staged, err := r.StagedPaths(ctx)
	if err != nil {
		return "", err
	}
	if len(staged) == 0 {
		return "", nil
	}
	if _, err := r.git(ctx, "commit", "-q", "--no-edit", "-m", message); err != nil {
		return "", err
	}
	return r.Head(ctx)
}

// HeadHasTrailer reports whether HEAD is a commit whose message names the
// operation id in an OperationTrailer line.
func (r *Repo) HeadHasTrailer(ctx context.Context, opID string) (string, bool, error) {
	head, err := r.Head(ctx)
	if err != nil || head == "" {
		return "", false, err
	}
	msg, err := r.git(ctx, "log", "-1", "--format=%B", head)
	if err != nil {
		return "", false, err
	}
	for _, line := range strings.Split(string(msg), "\n") {
		if strings.TrimSpace(line) == OperationTrailer+": "+opID {
			return head, true, nil
		}
	}
	return "", false, nil
}

// ResetTo moves the current branch back to head and makes the index match
// it, leaving the work tree alone; head "" returns an unborn branch with an
// empty index. It undoes a commit (or a staging) desk made after head.
func (r *Repo) ResetTo(ctx context.Context, head string) error {
	if head != "" {
		_, err := r.git(ctx, "reset", "-q", "--mixed", head)
		return err
	}
	cur, err := r.Head(ctx)
	if err != nil {
		return err
	}
	if cur != "" {
		if _, err := r.git(ctx, "update-ref", "-d", "HEAD"); err != nil {
			return err
		}
	}
	_, err = r.git(ctx, "read-tree", "--empty")
	return err
}

// Merge3 merges two descendants of base with git merge-file --diff3. It
// returns the merged bytes and whether the merge was clean; an unclean
// result holds conflict markers and must never be written as a file's
// content. Files git cannot merge (binary ones) are reported unclean.
func Merge3(ctx context.Context, local, base, incoming []byte) ([]byte, bool, error) {
	dir, err := os.MkdirTemp("", "desk-merge-")
	if err != nil {
		return nil, false, err
	}
	defer os.RemoveAll(dir)
	names := []string{"workspace", "base", "template"}
	for i, b := range [][]byte{local, base, incoming} {
		if err := os.WriteFile(filepath.Join(dir, names[i]), b, 0o600); err != nil {
			return nil, false, err
		}
	}
	out, err := gitNoRepo(ctx, dir, "merge-file", "--diff3", "-p",
		"-L", "workspace", "-L", "base", "-L", "template", names[0], names[1], names[2])
	if err == nil {
		return out, true, nil
	}
	var ge *GitError
	if errors.As(err, &ge) && ge.Code > 0 {
		// 1..127 counts conflicts; higher codes (binary files, which git
		// refuses to merge) leave no usable merge either.
		return out, false, nil
	}
	return nil, false, err
}
