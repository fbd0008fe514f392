package lifecycle

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
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
	git, err := exec.LookPath("git")
	if err != nil {
		return true, nil, "git is not installed"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The checkout's own config must not make status run a program.
	cmd := exec.CommandContext(ctx, git, "-c", "core.fsmonitor=false", "-C", dir, "status", "--porcelain=v1", "-z", "--untracked-files=all")
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return true, nil, msg
	}
	recs := strings.Split(out.String(), "\x00")
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
