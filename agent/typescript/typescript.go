// Package typescript owns desk's TypeScript toolchain for the agent's
// execute_typescript tool: finding the compiler (TypeScript 7, the native
// tsgo build that npm's typescript@7 package ships) and Node, the fixed
// compiler command line, and reading the compiler's diagnostics into
// structured records.
//
// The compiler is found once, at startup: DESK_TSC (app.Config.TSC) names
// it, else `tsc` on PATH (what `npm i -g typescript@7` installs). Either
// may be npm's wrapper script (node_modules/.bin/tsc → typescript/bin/tsc,
// a Node script that execs the platform package's binary) or the native
// binary itself; desk resolves the wrapper to the binary, because the
// sandbox that typechecks a snippet shows it only the binary's own
// directory (the binary and its lib.*.d.ts), not a node_modules tree.
package typescript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
)

// Toolchain is a usable compiler and Node.
type Toolchain struct {
	// TSC is the native compiler binary (resolved, no symbolic link);
	// its directory holds the lib.*.d.ts it needs.
	TSC string
	// Version is what `tsc --version` printed ("7.0.2").
	Version string
	// Node is the node binary (resolved).
	Node string
	// NodeVersion is what `node --version` printed ("v20.20.2").
	NodeVersion string
	// Types is the node_modules directory that holds @types/node (and
	// the packages its declarations reference, such as undici-types),
	// found beside the compiler's package; "" when there is none, and
	// snippets then have no Node typings.
	Types string
	// TypesVersion is @types/node's version ("20.19.43").
	TypesVersion string
}

// Dir is the compiler's directory, bound read-only into the typecheck's
// sandbox.
func (t *Toolchain) Dir() string { return filepath.Dir(t.TSC) }

// Detect finds the toolchain. tsc is DESK_TSC's value ("" looks for tsc
// on PATH). The error says what is missing and how to install it; it is
// shown to the model (list_extensions) and in desk's startup log.
func Detect(tsc string) (*Toolchain, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is not installed (install Node.js 18 or later, e.g. apt-get install nodejs)")
	}
	node, err = filepath.EvalSymlinks(node)
	if err != nil {
		return nil, fmt.Errorf("node: %v", err)
	}
	nodeVersion, err := version(node)
	if err != nil {
		return nil, fmt.Errorf("node at %s does not run: %v", node, err)
	}
	from := "DESK_TSC"
	if tsc == "" {
		from = "PATH"
		tsc, err = exec.LookPath("tsc")
		if err != nil {
			return nil, fmt.Errorf("the TypeScript compiler is not installed (npm i -g typescript@7, or set DESK_TSC to its tsc)")
		}
	}
	exe, err := Native(tsc)
	if err != nil {
		return nil, fmt.Errorf("the TypeScript compiler (%s from %s): %v", tsc, from, err)
	}
	v, err := version(exe)
	if err != nil {
		return nil, fmt.Errorf("the TypeScript compiler at %s does not run: %v", exe, err)
	}
	v = strings.TrimPrefix(v, "Version ")
	if !strings.HasPrefix(v, "7.") {
		return nil, fmt.Errorf("the TypeScript compiler at %s is version %s; desk needs TypeScript 7 (npm i -g typescript@7)", exe, v)
	}
	t := &Toolchain{TSC: exe, Version: v, Node: node, NodeVersion: nodeVersion}
	t.Types, t.TypesVersion = nodeTypes(tsc, exe)
	return t, nil
}

// nodeTypes finds the node_modules directory with @types/node that the
// compiler was installed into (npm i -g typescript@7 @types/node puts
// both in one): the first node_modules above the wrapper script or the
// native binary that has @types/node/package.json.
func nodeTypes(paths ...string) (dir, version string) {
	for _, p := range paths {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		for d := filepath.Dir(p); d != filepath.Dir(d); d = filepath.Dir(d) {
			if filepath.Base(d) != "node_modules" {
				continue
			}
			var meta struct{ Name, Version string }
			b, err := os.ReadFile(filepath.Join(d, "@types", "node", "package.json"))
			if err == nil && json.Unmarshal(b, &meta) == nil && meta.Name == "@types/node" {
				return d, meta.Version
			}
		}
	}
	return "", ""
}

// Native resolves tsc to the native compiler binary: itself when it is
// one, else, for npm's wrapper script, the binary of the platform package
// (@typescript/typescript-<os>-<arch>/lib/tsc) installed beside or inside
// the typescript package, as the wrapper itself looks it up.
func Native(tsc string) (string, error) {
	p, err := filepath.EvalSymlinks(tsc)
	if err != nil {
		return "", err
	}
	if native(p) {
		return p, nil
	}
	// typescript/bin/tsc → the typescript package.
	pkg := filepath.Dir(filepath.Dir(p))
	var meta struct{ Name, Version string }
	if b, err := os.ReadFile(filepath.Join(pkg, "package.json")); err != nil || json.Unmarshal(b, &meta) != nil || meta.Name != "typescript" {
		return "", fmt.Errorf("%s is neither the native compiler nor the typescript package's bin/tsc", p)
	}
	plat := "typescript-" + runtime.GOOS + "-" + map[string]string{"amd64": "x64", "386": "ia32"}[runtime.GOARCH]
	if strings.HasSuffix(plat, "-") {
		plat += runtime.GOARCH
	}
	for _, dir := range []string{filepath.Join(pkg, "node_modules"), filepath.Dir(pkg)} {
		cand := filepath.Join(dir, "@typescript", plat, "lib", "tsc")
		if c, err := filepath.EvalSymlinks(cand); err == nil && native(c) {
			return c, nil
		}
	}
	if !strings.HasPrefix(meta.Version, "7.") {
		return "", fmt.Errorf("it is typescript %s, a compiler desk cannot use; desk needs TypeScript 7 (npm i -g typescript@7)", meta.Version)
	}
	return "", fmt.Errorf("typescript %s has no native compiler for %s/%s (@typescript/%s is missing)", meta.Version, runtime.GOOS, runtime.GOARCH, plat)
}

// native reports whether p is an executable binary rather than a script.
func native(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var head [4]byte
	n, _ := f.Read(head[:])
	return n == 4 && (string(head[:]) == "\x7fELF" || head == [4]byte{0xcf, 0xfa, 0xed, 0xfe})
}

func version(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// Source and Output are the snippet's file name in its directory and the
// file the compiler writes for it.
const (
	Source = "snippet.mts"
	Output = "out/snippet.mjs"
)

// Args are the compiler's arguments for a snippet in the working
// directory: strict, an ES module for Node (.mts → .mjs, top-level await
// allowed), nothing emitted on any diagnostic, and the libraries not
// checked again (--skipLibCheck: they are the compiler's own and
// @types/node). Diagnostics come one a line, unformatted (--pretty false).
//
// types is where the compiler finds @types/node (a node_modules directory
// as the compiler sees it, "" for none). With it the snippet gets Node's
// typings (process, node:fs, …) and nothing else: --types node names the
// one package, and the typecheck's sandbox holds only the snippet, the
// compiler and that directory, so an import of another file or package
// finds nothing. Without it nothing is resolved outside the file at all
// (--noResolve).
func Args(types string) []string {
	a := []string{"--pretty", "false", "--noEmitOnError", "--skipLibCheck", "--strict",
		"--target", "es2022", "--module", "nodenext", "--outDir", "out"}
	if types == "" {
		a = append(a, "--noResolve")
	} else {
		a = append(a, "--types", "node", "--typeRoots", path.Join(filepath.ToSlash(types), "@types"))
	}
	return append(a, Source)
}

// Diagnostic is one compiler diagnostic of a snippet. Line and Column are
// 1-based; both are 0 for a diagnostic without a position (a compiler
// option the compiler refused).
type Diagnostic struct {
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Code     string `json:"code"`
	Category string `json:"category"`
	Message  string `json:"message"`
}

var (
	located = regexp.MustCompile(`^(.*)\((\d+),(\d+)\): (error|warning|message) (TS\d+): (.*)$`)
	global  = regexp.MustCompile(`^(error|warning|message) (TS\d+): (.*)$`)
)

// Parse reads the compiler's --pretty false output: one line per
// diagnostic, `file(line,col): error TSnnnn: message`, or `error TSnnnn:
// message` without a position; an indented line continues the message
// before it (a chain of reasons). Other lines are ignored.
func Parse(out []byte) []Diagnostic {
	var ds []Diagnostic
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if m := located.FindStringSubmatch(line); m != nil {
			l, _ := strconv.Atoi(m[2])
			c, _ := strconv.Atoi(m[3])
			ds = append(ds, Diagnostic{Line: l, Column: c, Category: m[4], Code: m[5], Message: m[6]})
			continue
		}
		if m := global.FindStringSubmatch(line); m != nil {
			ds = append(ds, Diagnostic{Category: m[1], Code: m[2], Message: m[3]})
			continue
		}
		if len(ds) > 0 && strings.TrimSpace(line) != "" && (line[0] == ' ' || line[0] == '\t') {
			ds[len(ds)-1].Message += "\n" + strings.TrimSpace(line)
		}
	}
	return ds
}
