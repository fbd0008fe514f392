package checkout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
)

// Host-side git. Every git program desk runs on the host goes through Git
// (or GitInput): the work trees it runs in are checkouts a sandboxed agent
// can write, .git included, and git runs programs a repository names —
// hooks, filters, diff and merge drivers, fsmonitor, pagers, editors,
// credential helpers, and config files pulled in by include. None of them
// may run on the host. So every invocation
//
//   - runs in a scrubbed environment: PATH, HOME=/dev/null, LC_ALL=C, desk's
//     identity, no system or global config (GIT_CONFIG_NOSYSTEM,
//     GIT_CONFIG_GLOBAL=/dev/null), no system attributes, no prompts, no
//     pager or editor (GIT_PAGER=cat, GIT_EDITOR=:, --no-pager) and nothing
//     of desk's own GIT_* variables;
//   - names the git directory and the work tree itself (--git-dir,
//     --work-tree), after checking that the work tree's .git is one desk
//     made: a directory of the checkout, or a worktree's git directory
//     under it — never a .git file, commondir or symbolic link that leads
//     to another repository on the host (checkRepo);
//   - overrides, as command-line config (GIT_CONFIG_COUNT, which beats the
//     repository's config), every key that can make git run a program:
//     core.hooksPath=/dev/null (no hook can exist below it),
//     core.fsmonitor=false, and for each driver name the repository's
//     config defines, its filter clean/smudge/process, diff textconv/command
//     and merge driver set empty (and filter.<name>.required=false);
//   - refuses, with ECONFLICT naming the key, what no override can undo:
//     include.path and includeIf.*.path, which pull in config desk cannot
//     see before git reads it.
//
// The repository's config is read for this with `git config --file …
// --no-includes --list`, which executes nothing.

// HooksPath is the core.hooksPath of every host git invocation: below
// /dev/null nothing can exist, so no hook is ever found.
const HooksPath = "/dev/null"

// fixedConfig is the command-line config of every invocation.
var fixedConfig = [][2]string{
	{"core.hooksPath", HooksPath},
	{"core.fsmonitor", "false"},
	{"core.quotePath", "off"},
	{"core.pager", "cat"},
	{"core.editor", ":"},
	{"sequence.editor", ":"},
	{"diff.external", ""},
	{"credential.helper", ""}, // an empty value clears the helper list
	// Signing and signature checks would run gpg.program.
	{"commit.gpgSign", "false"},
	{"tag.gpgSign", "false"},
	{"log.showSignature", "false"},
	// No transport: no ssh, proxy, askpass or remote helper.
	{"protocol.allow", "never"},
	// An automatic gc or maintenance is work nobody asked for.
	{"gc.auto", "0"},
	{"maintenance.auto", "false"},
	// Submodules are repositories desk did not check: git would run
	// itself in them with their own config.
	{"submodule.recurse", "false"},
	{"diff.ignoreSubmodules", "all"},
	{"status.submoduleSummary", "false"},
}

// namedDrivers are, per config section, the variables of a named driver
// (<section>.<name>.<variable>) that name a program (or, for protocol,
// allow one), with the value that disables them, overridden for every
// name the repository's config defines in that section.
var namedDrivers = map[string][][2]string{
	"filter":     {{"clean", ""}, {"smudge", ""}, {"process", ""}, {"required", "false"}},
	"diff":       {{"textconv", ""}, {"command", ""}},
	"merge":      {{"driver", ""}},
	"credential": {{"helper", ""}},
	"protocol":   {{"allow", "never"}},
}

// gitEnv is the whole environment of a host git: nothing of desk's own
// environment but PATH (to find git), so no GIT_* variable of the
// operator's points git at another repository, config or program.
func gitEnv(config [][2]string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.DevNull,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_PAGER=cat",
		"GIT_EDITOR=:",
		"GIT_SEQUENCE_EDITOR=:",
		"GIT_AUTHOR_NAME=" + IdentityName, "GIT_AUTHOR_EMAIL=" + IdentityEmail,
		"GIT_COMMITTER_NAME=" + IdentityName, "GIT_COMMITTER_EMAIL=" + IdentityEmail,
	}
	if t := os.Getenv("TMPDIR"); t != "" {
		env = append(env, "TMPDIR="+t)
	}
	// GIT_CONFIG_KEY_n/VALUE_n rather than -c: a key is never parsed, so
	// a driver name holding '=' cannot split it.
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(config)))
	for i, kv := range config {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	return env
}

// Git runs `git args…` in the work tree dir, a checkout of a workspace or
// a worktree of one, with nothing of the repository able to run a
// program (see above). It returns git's standard output; a git that ran
// and failed is a *GitError; a repository desk refuses to run git in is
// ECONFLICT naming why.
func Git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return GitInput(ctx, dir, nil, args...)
}

// GitInput is Git with stdin as git's standard input.
func GitInput(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error) {
	gitDir, err := checkRepo(dir)
	if err != nil {
		return nil, err
	}
	config, err := repoConfig(ctx, dir, gitDir)
	if err != nil {
		return nil, err
	}
	full := append([]string{"--no-pager", "--git-dir=" + gitDir, "--work-tree=" + dir}, args...)
	return runGit(ctx, dir, stdin, append(append([][2]string{}, fixedConfig...), config...), nil, full, args)
}

// gitNoRepo runs git outside any repository (merge-file on files desk
// wrote in the temporary directory dir): git looks for no repository
// above dir.
func gitNoRepo(ctx context.Context, dir string, args ...string) ([]byte, error) {
	extra := []string{"GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir)}
	return runGit(ctx, dir, nil, fixedConfig, extra, append([]string{"--no-pager"}, args...), args)
}

func runGit(ctx context.Context, dir string, stdin io.Reader, config [][2]string, extraEnv, full, shown []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(config), extraEnv...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.Bytes(), &GitError{Args: shown, Code: ee.ExitCode(), Stderr: errb.String()}
		}
		return nil, fmt.Errorf("run git: %w", err)
	}
	return out.Bytes(), nil
}

// checkRepo returns the git directory of the work tree dir after checking
// it is one desk made: dir/.git a real directory with no commondir file
// (a checkout), or dir/.git a file naming <checkout>/.git/worktrees/<id>
// whose commondir is that <checkout>/.git, where dir is
// <workspace>/worktrees/<name> and <checkout> is <workspace>/checkout (a
// worktree, see AddWorktree). Anything else could send git, and desk's
// commits, to another repository on the host.
func checkRepo(dir string) (string, error) {
	dir = filepath.Clean(dir)
	p := filepath.Join(dir, ".git")
	fi, err := os.Lstat(p)
	if err != nil {
		return "", desk.Errorf(desk.ECONFLICT, "git: the work tree has no .git")
	}
	switch {
	case fi.IsDir():
		if err := noCommonDir(p, ".git"); err != nil {
			return "", err
		}
		return p, nil
	case fi.Mode().IsRegular():
	default:
		return "", desk.Errorf(desk.ECONFLICT, "git: the work tree's .git is a symbolic link or special file; desk runs git only in a .git directory it can see is the work tree's own")
	}
	g, ok := GitDir(dir)
	if !ok {
		return "", desk.Errorf(desk.ECONFLICT, "git: the work tree's .git file does not name a git directory")
	}
	checkoutGit := filepath.Join(filepath.Dir(filepath.Dir(dir)), layout.CheckoutDir, ".git")
	refuse := desk.Errorf(desk.ECONFLICT, "git: the work tree's .git file names a git directory other than a worktree of its workspace's checkout; desk runs git only in repositories it made (remove the .git file, or bind the session to the worktree again)")
	if filepath.Base(filepath.Dir(dir)) != layout.WorktreesDir {
		return "", refuse
	}
	rg, err1 := filepath.EvalSymlinks(g)
	rc, err2 := filepath.EvalSymlinks(checkoutGit)
	if err1 != nil || err2 != nil {
		return "", refuse
	}
	if filepath.Dir(rg) != filepath.Join(rc, "worktrees") {
		return "", refuse
	}
	if fi, err := os.Lstat(checkoutGit); err != nil || !fi.IsDir() {
		return "", refuse
	}
	if err := noCommonDir(checkoutGit, "the checkout's .git"); err != nil {
		return "", err
	}
	if c, err := filepath.EvalSymlinks(CommonDir(rg)); err != nil || c != rc {
		return "", refuse
	}
	return rg, nil
}

func noCommonDir(gitDir, name string) error {
	if _, err := os.Lstat(filepath.Join(gitDir, "commondir")); !errors.Is(err, os.ErrNotExist) {
		return desk.Errorf(desk.ECONFLICT, "git: %s holds a commondir file, which would make git use another repository's directory; desk refuses to run git there (remove %s/commondir)", name, name)
	}
	return nil
}

// repoConfig reads the config files of the repository behind gitDir
// (its common directory's config and config.worktree, and the worktree's
// own config.worktree) and returns the overrides for the drivers they
// name, or ECONFLICT naming a key that no override can neutralise.
func repoConfig(ctx context.Context, dir, gitDir string) ([][2]string, error) {
	common := CommonDir(gitDir)
	files := []string{filepath.Join(common, "config"), filepath.Join(common, "config.worktree")}
	if gitDir != common {
		files = append(files, filepath.Join(gitDir, "config.worktree"))
	}
	var out [][2]string
	seen := map[string]bool{}
	for _, f := range files {
		if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
			continue
		}
		name := f
		if r, err := filepath.Rel(dir, f); err == nil && !strings.HasPrefix(r, "..") {
			name = filepath.ToSlash(r)
		} else if r, err := filepath.Rel(filepath.Dir(common), f); err == nil {
			name = "the checkout's " + filepath.ToSlash(r)
		}
		b, err := runGit(ctx, "/", nil, nil, []string{"GIT_CEILING_DIRECTORIES=/"},
			[]string{"config", "--file", f, "--no-includes", "--null", "--list"}, []string{"config", "--list"})
		if err != nil {
			return nil, desk.Errorf(desk.ECONFLICT, "git: %s cannot be read as git config, so desk cannot tell what it would make git run: %s", name, desk.ErrorMessage(err))
		}
		for _, rec := range strings.Split(string(b), "\x00") {
			key, _, _ := strings.Cut(rec, "\n")
			if key == "" {
				continue
			}
			section, rest, _ := strings.Cut(key, ".")
			section = strings.ToLower(section)
			if section == "include" || section == "includeif" {
				return nil, desk.Errorf(desk.ECONFLICT, "git: %s sets %s, which would make git read config desk has not checked (and could name programs to run); desk refuses to run git in this repository until the key is removed", name, key)
			}
			vars, ok := namedDrivers[section]
			i := strings.LastIndexByte(rest, '.')
			if !ok || i < 0 {
				continue
			}
			sub := rest[:i]
			if seen[section+"\x00"+sub] {
				continue
			}
			seen[section+"\x00"+sub] = true
			for _, v := range vars {
				out = append(out, [2]string{section + "." + sub + "." + v[0], v[1]})
			}
		}
	}
	return out, nil
}
