package lifecycle

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/checkout"
)

// uncommitted lists the uncommitted paths of a checkout that is a git
// repository, as `git status --porcelain` lines ("M path", "?? path").
// isGit is false when dir is not a repository; a git that is missing or
// fails is reported in gitErr rather than failing the offboarding, whose
// handoff should still be written.
func uncommitted(ctx context.Context, dir string) (isGit bool, paths []string, gitErr string) {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err != nil {
		return false, nil, ""
	}
	if _, err := exec.LookPath("git"); err != nil {
		return true, nil, "git is not installed"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// checkout.Git runs nothing the checkout names (hooks, fsmonitor,
	// filters) and refuses a .git that leads elsewhere; a refusal is
	// reported like any git failure, so offboarding still completes.
	out, err := checkout.Git(ctx, dir, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all")
	if err != nil {
		var ge *checkout.GitError
		if errors.As(err, &ge) && strings.TrimSpace(ge.Stderr) != "" {
			return true, nil, strings.TrimSpace(ge.Stderr)
		}
		return true, nil, desk.ErrorMessage(err)
	}
	recs := strings.Split(string(out), "\x00")
	for i := 0; i < len(recs); i++ {
		r := recs[i]
		if len(r) < 4 {
			continue
		}
		code, p := strings.TrimSpace(r[:2]), r[3:]
		// A rename or copy is followed by its source path.
		if strings.ContainsAny(r[:2], "RC") && i+1 < len(recs) {
			p = recs[i+1] + " -> " + p
			i++
		}
		paths = append(paths, code+" "+p)
	}
	return true, paths, ""
}
