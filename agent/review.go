package agent

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The auto-review rule set, used when no reviewer model is available. It
// judges a command by its parsed shell syntax tree (mvdan.cc/sh), not by
// its text, so quoting ('r''m', "rm", \rm), wrappers (sudo, env, xargs),
// nested scripts (sh -c "…", eval) and substitutions cannot hide what runs.
// What it cannot know it declines: a command name computed at run time, a
// script a shell reads from a pipe or a process substitution, and anything
// that does not parse. Everything else that the sandbox allows is approved.

// execTool is the one tool whose action is a shell command.
const execTool = "exec_command"

// maxScriptDepth bounds nested scripts (sh -c "sh -c '…'").
const maxScriptDepth = 8

// unknown stands for the part of a word that is only known at run time.
const unknown = "\x00"

// ruleReview judges one gated action by the rule set.
func ruleReview(tool, summary string) (bool, string) {
	if tool != execTool {
		return true, "rule set: no rule refuses this action"
	}
	if why := judgeScript(commandOf(summary), 0); why != "" {
		return false, "rule set: the command " + why
	}
	return true, "rule set: no rule refuses this command"
}

// commandOf takes the command out of exec_command's summary, which names
// the working directory first when the call gave one: "(in /x) cmd".
func commandOf(summary string) string {
	if rest, ok := strings.CutPrefix(summary, "(in "); ok {
		if i := strings.Index(rest, ") "); i >= 0 {
			return rest[i+2:]
		}
	}
	return summary
}

// judgeScript parses a script and returns why it is refused, or "".
func judgeScript(src string, depth int) string {
	if depth > maxScriptDepth {
		return "nests scripts too deeply to be reviewed"
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return fmt.Sprintf("does not parse as a shell command, so it cannot be reviewed (%v)", err)
	}
	r := &reviewer{depth: depth}
	syntax.Walk(f, r.visit)
	return r.why
}

type reviewer struct {
	depth int
	why   string // the first refusal
}

func (r *reviewer) refuse(format string, args ...any) {
	if r.why == "" {
		r.why = fmt.Sprintf(format, args...)
	}
}

func (r *reviewer) visit(n syntax.Node) bool {
	if r.why != "" {
		return false
	}
	switch n := n.(type) {
	case *syntax.CallExpr:
		if len(n.Args) > 0 {
			r.call(n.Args)
		}
	case *syntax.BinaryCmd:
		if n.Op == syntax.Pipe || n.Op == syntax.PipeAll {
			r.pipe(n)
		}
	case *syntax.FuncDecl:
		r.funcDecl(n)
	case *syntax.Redirect:
		r.redirect(n)
	}
	return true
}

// word is one shell word as far as it is known before run time: text with
// unknown marking what a parameter or a substitution supplies ($HOME is
// written "~", which the rules treat alike). computed is set when a
// command substitution or process substitution supplies part of it.
type word struct {
	text      string
	computed  bool
	procSubst bool
}

func (w word) known() bool { return !strings.Contains(w.text, unknown) }

func resolve(w *syntax.Word) word {
	var out word
	var b strings.Builder
	for i, p := range w.Parts {
		parts(&b, &out, p, i == 0, false)
	}
	out.text = b.String()
	return out
}

func parts(b *strings.Builder, out *word, p syntax.WordPart, first, quoted bool) {
	switch p := p.(type) {
	case *syntax.Lit:
		b.WriteString(unescape(p.Value, quoted))
	case *syntax.SglQuoted:
		b.WriteString(p.Value)
	case *syntax.DblQuoted:
		for i, q := range p.Parts {
			parts(b, out, q, first && i == 0, true)
		}
	case *syntax.ParamExp:
		if first && b.Len() == 0 && p.Param != nil && p.Param.Value == "HOME" && p.Exp == nil && p.Repl == nil && p.Slice == nil && !p.Length && !p.Excl {
			b.WriteString("~")
			return
		}
		b.WriteString(unknown)
	case *syntax.CmdSubst:
		out.computed = true
		b.WriteString(unknown)
	case *syntax.ProcSubst:
		out.computed, out.procSubst = true, true
		b.WriteString(unknown)
	default: // arithmetic, extended globs: not a name the rules know
		b.WriteString(unknown)
	}
}

// unescape removes the backslashes of a literal: outside quotes a
// backslash quotes any character (\rm is rm); inside double quotes only
// $ ` " \ and a newline.
func unescape(s string, quoted bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			c := s[i+1]
			if !quoted || strings.IndexByte("$`\"\\\n", c) >= 0 {
				if c != '\n' {
					b.WriteByte(c)
				}
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// wrappers run the rest of their arguments as a command. The value is how
// many leading non-option arguments belong to the wrapper itself.
var wrappers = map[string]int{
	"sudo": 0, "doas": 0, "env": 0, "nohup": 0, "nice": 0, "ionice": 0, "exec": 0, "command": 0,
	"builtin": 0, "time": 0, "stdbuf": 0, "setsid": 0, "chronic": 0, "unbuffer": 0, "xargs": 0,
	"timeout": 1, "busybox": 0, "watch": 0, "flock": 1, "chroot": 1,
}

// wrapperOptsWithValue are options of wrappers that take the next argument.
var wrapperOptsWithValue = map[string]bool{
	"-u": true, "-g": true, "-n": true, "-s": true, "-k": true, "-I": true, "-L": true,
	"-d": true, "-P": true, "-E": true, "-C": true, "--user": true, "--group": true,
}

var shells = map[string]bool{"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "ash": true, "mksh": true, "fish": true, "csh": true, "tcsh": true}

var interpreters = map[string]bool{"python": true, "python2": true, "python3": true, "perl": true, "ruby": true, "node": true, "php": true, "lua": true, "deno": true, "bun": true, "osascript": true}

var downloaders = map[string]bool{"curl": true, "wget": true, "fetch": true, "aria2c": true, "nc": true, "ncat": true, "socat": true}

// cmdName is a command word's name: its last path element ("/bin/rm" is
// rm), or "" when any of it is computed at run time.
func cmdName(w word) string {
	if !w.known() {
		return ""
	}
	return path.Base(w.text)
}

// call judges one simple command.
func (r *reviewer) call(args []*syntax.Word) {
	ws := make([]word, len(args))
	for i, a := range args {
		ws[i] = resolve(a)
	}
	r.command(ws, 0)
}

func (r *reviewer) command(ws []word, hops int) {
	if len(ws) == 0 || hops > maxScriptDepth {
		return
	}
	w := ws[0]
	if w.computed {
		r.refuse("runs a command whose name is the output of another command, which cannot be known before it runs (%s)", shown(w))
		return
	}
	if strings.Trim(w.text, unknown+"/") == "" && strings.Contains(w.text, unknown) {
		r.refuse("runs a command named only by a variable, which cannot be known before it runs")
		return
	}
	name := cmdName(w)
	args := ws[1:]
	if n, ok := wrappers[name]; ok {
		r.command(unwrap(name, args, n), hops+1)
		return
	}
	switch {
	case name == "rm":
		r.rm(args)
	case name == "find":
		r.find(args)
	case strings.HasPrefix(name, "mkfs") || name == "fdisk" || name == "sfdisk" || name == "parted" || name == "wipefs" || name == "mkswap" || name == "cfdisk" || name == "gdisk" || name == "sgdisk":
		r.refuse("formats or partitions a disk (%s)", name)
	case name == "dd":
		for _, a := range args {
			if t, ok := strings.CutPrefix(a.text, "of="); ok && rawDevice(t) {
				r.refuse("writes to a raw device (%s)", t)
			}
		}
	case name == "shutdown" || name == "reboot" || name == "halt" || name == "poweroff":
		r.refuse("stops the machine (%s)", name)
	case (name == "init" || name == "telinit") && len(args) > 0 && (args[0].text == "0" || args[0].text == "6"):
		r.refuse("stops the machine (%s %s)", name, args[0].text)
	case name == "systemctl" && hasAny(args, "poweroff", "reboot", "halt", "kexec", "suspend", "hibernate"):
		r.refuse("stops the machine (systemctl)")
	case name == "chmod" || name == "chown" || name == "chgrp":
		r.chmod(name, args)
	case shells[name] || name == "su" || name == "runuser":
		// su USER -c CMD runs CMD with a shell, as sh -c does.
		r.shell(name, args)
	case name == "eval":
		r.nested("eval", args)
	case name == "source" || name == ".":
		if len(args) > 0 && args[0].procSubst {
			r.refuse("runs a script produced at run time (%s with a process substitution)", name)
		}
	}
}

// unwrap returns the command a wrapper runs: its arguments after the
// wrapper's own options, assignments (env) and fixed arguments (timeout's
// duration).
func unwrap(name string, args []word, fixed int) []word {
	i := 0
	for i < len(args) {
		t := args[i].text
		switch {
		case t == "--":
			i++
			return skipFixed(args[i:], fixed)
		case strings.HasPrefix(t, "-") && len(t) > 1:
			if wrapperOptsWithValue[t] {
				i++
			}
			i++
		case name == "env" && strings.Contains(t, "="):
			i++
		default:
			return skipFixed(args[i:], fixed)
		}
	}
	return nil
}

func skipFixed(args []word, n int) []word {
	if len(args) < n {
		return nil
	}
	return args[n:]
}

func hasAny(args []word, names ...string) bool {
	for _, a := range args {
		for _, n := range names {
			if a.text == n {
				return true
			}
		}
	}
	return false
}

func shown(w word) string {
	t := strings.ReplaceAll(w.text, unknown, "…")
	if t == "" {
		return "…"
	}
	return t
}

// rm refuses a recursive delete of anything root-like, and any use of
// --no-preserve-root.
func (r *reviewer) rm(args []word) {
	recursive, opts := false, true
	var targets []word
	for _, a := range args {
		t := a.text
		switch {
		case opts && t == "--":
			opts = false
		case opts && t == "--no-preserve-root":
			r.refuse("deletes with --no-preserve-root, which exists only to delete /")
			return
		case opts && (t == "--recursive" || t == "--dir"):
			recursive = recursive || t == "--recursive"
		case opts && strings.HasPrefix(t, "--"):
		case opts && strings.HasPrefix(t, "-") && len(t) > 1 && a.known():
			if strings.ContainsAny(t[1:], "rR") {
				recursive = true
			}
		default:
			targets = append(targets, a)
		}
	}
	if !recursive {
		return
	}
	for _, t := range targets {
		if why := rootLike(t); why != "" {
			r.refuse("deletes a whole tree (rm -r %s: %s)", shown(t), why)
			return
		}
	}
}

// topDirs are directories whose wholesale deletion is never ordinary work:
// the system's and the guest's own mounts.
var topDirs = map[string]bool{
	"/artifacts": true, "/workspace": true, "/scratch": true, "/context": true,
	"/bin": true, "/boot": true, "/dev": true, "/etc": true, "/home": true, "/lib": true, "/lib64": true,
	"/opt": true, "/proc": true, "/root": true, "/sbin": true, "/srv": true, "/sys": true, "/usr": true, "/var": true,
	"/mnt": true, "/media": true, "/run": true, "/tmp": true, "/nix": true, "/snap": true, "/Users": true, "/System": true,
}

// rootLike says why a path names a root-like tree, or "". Globs that
// match everything in a directory count as the directory.
func rootLike(w word) string {
	t := w.text
	if t == "" {
		return ""
	}
	if strings.Trim(t, unknown+"/*") == "" {
		if strings.Contains(t, unknown) {
			return "the target is known only at run time"
		}
	}
	t = strings.ReplaceAll(t, unknown, "x")
	for strings.HasSuffix(t, "/*") || strings.HasSuffix(t, "/.*") {
		t = t[:strings.LastIndexByte(t, '/')]
		if t == "" {
			t = "/"
		}
	}
	switch {
	case t == "*" || t == ".*":
		return "everything in the working directory"
	case t == "~" || t == "~/" || strings.HasPrefix(t, "~/") && isUp(path.Clean(t[2:])):
		return "the home directory"
	case strings.HasPrefix(t, "~") && !strings.Contains(t, "/"):
		return "a home directory"
	case strings.HasPrefix(t, "/"):
		c := path.Clean(t)
		if c == "/" {
			return "the root directory"
		}
		if topDirs[c] {
			return "a top-level directory"
		}
	default:
		if isUp(path.Clean(t)) {
			return "the working directory or one above it"
		}
	}
	return ""
}

// isUp reports whether a clean relative path is "." or only climbs ("..",
// "../..").
func isUp(c string) bool {
	if c == "." {
		return true
	}
	for _, e := range strings.Split(c, "/") {
		if e != ".." {
			return false
		}
	}
	return true
}

// find refuses deleting (-delete, -exec rm, -exec a shell) from a root-like
// starting point.
func (r *reviewer) find(args []word) {
	var starts []word
	i := 0
	for ; i < len(args); i++ {
		t := args[i].text
		if strings.HasPrefix(t, "-") || t == "(" || t == "!" {
			break
		}
		starts = append(starts, args[i])
	}
	deletes := ""
	for j := i; j < len(args); j++ {
		switch args[j].text {
		case "-delete":
			deletes = "-delete"
		case "-exec", "-execdir", "-ok", "-okdir":
			if j+1 < len(args) {
				n := cmdName(args[j+1])
				if n == "rm" || n == "shred" || n == "unlink" || shells[n] {
					deletes = args[j].text + " " + n
				}
			}
		}
	}
	if deletes == "" {
		return
	}
	for _, s := range starts {
		if why := rootLike(s); why != "" && why != "the working directory or one above it" && why != "everything in the working directory" {
			r.refuse("deletes a whole tree (find %s … %s: %s)", shown(s), deletes, why)
			return
		}
	}
}

// chmod refuses opening up or handing over a root-like tree.
func (r *reviewer) chmod(name string, args []word) {
	var mode string
	var targets []word
	for _, a := range args {
		t := a.text
		switch {
		case strings.HasPrefix(t, "-"):
		case mode == "":
			mode = t
		default:
			targets = append(targets, a)
		}
	}
	wide := name != "chmod" || strings.HasSuffix(mode, "777") || strings.HasSuffix(mode, "666") || strings.Contains(mode, "o+w") || strings.Contains(mode, "a+w") || strings.Contains(mode, "+rwx")
	if !wide {
		return
	}
	for _, t := range targets {
		if why := rootLike(t); why != "" && why != "the working directory or one above it" && why != "everything in the working directory" {
			r.refuse("opens up system permissions (%s %s %s: %s)", name, mode, shown(t), why)
			return
		}
	}
}

// shell judges a shell invocation: the script of -c is parsed and judged
// in turn; a script computed at run time or read from a process
// substitution cannot be judged and is declined.
func (r *reviewer) shell(name string, args []word) {
	for i, a := range args {
		if a.procSubst {
			r.refuse("runs a script produced at run time (%s reading a process substitution)", name)
			return
		}
		if (name == "su" || name == "runuser") && i == 0 && !strings.HasPrefix(a.text, "-") {
			continue // the user
		}
		if !strings.HasPrefix(a.text, "-") {
			return // a script file: its contents are not the command's text
		}
		if a.text == "-c" || (!strings.HasPrefix(a.text, "--") && strings.Contains(a.text, "c") && a.known()) {
			if i+1 >= len(args) {
				return
			}
			s := args[i+1]
			if !s.known() {
				r.refuse("runs a script computed at run time (%s -c with a substitution)", name)
				return
			}
			if why := judgeScript(s.text, r.depth+1); why != "" {
				r.refuse("%s", why)
			}
			return
		}
	}
}

// nested judges eval's arguments as the script they are.
func (r *reviewer) nested(name string, args []word) {
	var parts []string
	for _, a := range args {
		if !a.known() {
			r.refuse("runs a script computed at run time (%s with a substitution)", name)
			return
		}
		parts = append(parts, a.text)
	}
	if why := judgeScript(strings.Join(parts, " "), r.depth+1); why != "" {
		r.refuse("%s", why)
	}
}

// pipe refuses feeding a shell a script through a pipe (the rule set cannot
// see what it will run), and a download piped into an interpreter.
func (r *reviewer) pipe(b *syntax.BinaryCmd) {
	right := firstCall(b.Y)
	if right == nil {
		return
	}
	ws := make([]word, len(right.Args))
	for i, a := range right.Args {
		ws[i] = resolve(a)
	}
	for hops := 0; len(ws) > 0 && hops < maxScriptDepth; hops++ {
		n := cmdName(ws[0])
		fixed, ok := wrappers[n]
		if !ok {
			break
		}
		ws = unwrap(n, ws[1:], fixed)
	}
	if len(ws) == 0 {
		return
	}
	n := cmdName(ws[0])
	runsStdin := shells[n] && !hasScriptArg(ws[1:])
	if runsStdin {
		if src := downloader(b.X); src != "" {
			r.refuse("pipes a download into a shell (%s | %s)", src, n)
		} else {
			r.refuse("feeds a shell (%s) a script through a pipe, which cannot be reviewed", n)
		}
		return
	}
	if interpreters[n] || strings.HasPrefix(n, "python") {
		if src := downloader(b.X); src != "" {
			r.refuse("pipes a download into an interpreter (%s | %s)", src, n)
		}
	}
}

// hasScriptArg reports whether a shell's arguments name its script (-c or
// a file), so it does not read one from standard input.
func hasScriptArg(args []word) bool {
	for _, a := range args {
		if a.text == "-s" {
			return false
		}
		if !strings.HasPrefix(a.text, "-") {
			return true
		}
		if strings.Contains(a.text, "c") && !strings.HasPrefix(a.text, "--") {
			return true
		}
	}
	return false
}

// firstCall is the simple command at the start of a pipeline stage.
func firstCall(s *syntax.Stmt) *syntax.CallExpr {
	if s == nil {
		return nil
	}
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		if len(c.Args) > 0 {
			return c
		}
	case *syntax.BinaryCmd:
		return firstCall(c.X)
	}
	return nil
}

// downloader names a download command anywhere in a pipeline's left side.
func downloader(s *syntax.Stmt) string {
	found := ""
	syntax.Walk(s, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 && found == "" {
			ws := make([]word, len(c.Args))
			for i, a := range c.Args {
				ws[i] = resolve(a)
			}
			for hops := 0; len(ws) > 0 && hops < maxScriptDepth; hops++ {
				n := cmdName(ws[0])
				if downloaders[n] {
					found = n
					break
				}
				fixed, ok := wrappers[n]
				if !ok {
					break
				}
				ws = unwrap(n, ws[1:], fixed)
			}
		}
		return found == ""
	})
	return found
}

// funcDecl refuses a fork bomb: a function that starts itself in a pipe or
// in the background (:(){ :|:& };:).
func (r *reviewer) funcDecl(f *syntax.FuncDecl) {
	if f.Name == nil || f.Body == nil {
		return
	}
	name := f.Name.Value
	self := func(s *syntax.Stmt) bool {
		c := firstCall(s)
		return c != nil && cmdName(resolve(c.Args[0])) == name
	}
	syntax.Walk(f.Body, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.BinaryCmd:
			if (n.Op == syntax.Pipe || n.Op == syntax.PipeAll) && (self(n.X) || self(n.Y)) {
				r.refuse("is a fork bomb (function %s starts itself in a pipe)", name)
			}
		case *syntax.Stmt:
			if n.Background && self(n) {
				r.refuse("is a fork bomb (function %s starts itself in the background)", name)
			}
		}
		return r.why == ""
	})
}

// redirect refuses writing to a raw device.
func (r *reviewer) redirect(rd *syntax.Redirect) {
	switch rd.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.RdrInOut:
	default:
		return
	}
	if rd.Word == nil {
		return
	}
	if t := resolve(rd.Word).text; rawDevice(t) {
		r.refuse("writes to a raw device (%s)", t)
	}
}

// rawDevice reports whether a path is a device node other than the
// harmless ones (null, zero, the standard streams, the terminal).
func rawDevice(p string) bool {
	c := path.Clean(p)
	if !strings.HasPrefix(c, "/dev/") {
		return false
	}
	switch c {
	case "/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty", "/dev/random", "/dev/urandom", "/dev/full":
		return false
	}
	return !strings.HasPrefix(c, "/dev/fd/") && !strings.HasPrefix(c, "/dev/pts/") && !strings.HasPrefix(c, "/dev/shm/")
}
