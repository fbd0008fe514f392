package typescript

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk/internal/npmbin"
)

// TestParse: located and global diagnostics, an indented continuation
// joined to its message, other lines ignored.
func TestParse(t *testing.T) {
	out := "snippet.mts(1,7): error TS2322: Type 'string' is not assignable to type 'number'.\n" +
		"snippet.mts(12,30): error TS2345: Argument of type '{ a: number; }' is not assignable.\n" +
		"  Property 'b' is missing.\r\n" +
		"error TS5023: Unknown compiler option '--bogus'.\n" +
		"Found 3 errors.\n"
	ds := Parse([]byte(out))
	if len(ds) != 3 {
		t.Fatalf("%+v", ds)
	}
	if d := ds[0]; d.Line != 1 || d.Column != 7 || d.Code != "TS2322" || d.Category != "error" || !strings.HasPrefix(d.Message, "Type 'string'") {
		t.Fatalf("first %+v", d)
	}
	if d := ds[1]; d.Line != 12 || d.Column != 30 || d.Message != "Argument of type '{ a: number; }' is not assignable.\nProperty 'b' is missing." {
		t.Fatalf("second %+v", d)
	}
	if d := ds[2]; d.Line != 0 || d.Code != "TS5023" {
		t.Fatalf("third %+v", d)
	}
}

// TestDetect: npm's wrapper (node_modules/.bin/tsc) resolves to the
// native TypeScript 7 binary, whose diagnostics Parse reads; a missing
// compiler and a script that is not the typescript package are refused
// with what to install.
func TestDetect(t *testing.T) {
	tsc := npmbin.Find(t, "tsc", "TypeScript (typescript@7)")
	tc, err := Detect(tsc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tc.Version, "7.") || !native(tc.TSC) || filepath.Base(tc.TSC) != "tsc" || tc.Node == "" {
		t.Fatalf("%+v", tc)
	}
	if _, err := os.Stat(filepath.Join(tc.Dir(), "lib.es2022.d.ts")); err != nil {
		t.Fatalf("the compiler's directory has no libraries: %v", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, Source), []byte("const x: number = \"a\";\n"), 0o644)
	cmd := exec.Command(tc.TSC, Args("")...)
	cmd.Dir = dir
	out, _ := cmd.CombinedOutput()
	if ds := Parse(out); len(ds) != 1 || ds[0].Line != 1 || ds[0].Column != 7 || ds[0].Code != "TS2322" {
		t.Fatalf("diagnostics %+v of %s", ds, out)
	}

	// .ci/npm installs @types/node beside the compiler: Detect finds it,
	// and with it a snippet may use Node's modules and globals, which
	// without it are unknown names.
	if tc.Types == "" || filepath.Base(tc.Types) != "node_modules" || tc.TypesVersion == "" {
		t.Fatalf("no Node typings found beside %s: %+v", tsc, tc)
	}
	node := "import { readFileSync } from \"node:fs\";\nconsole.log(process.argv.length, readFileSync(\"/etc/hostname\", \"utf8\").length);\n"
	os.WriteFile(filepath.Join(dir, Source), []byte(node), 0o644)
	for _, c := range []struct {
		types string
		want  []string
	}{{"", []string{"TS2591", "TS2591"}}, {tc.Types, nil}} {
		os.RemoveAll(filepath.Join(dir, "out"))
		cmd := exec.Command(tc.TSC, Args(c.types)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		var codes []string
		for _, d := range Parse(out) {
			codes = append(codes, d.Code)
		}
		if strings.Join(codes, ",") != strings.Join(c.want, ",") || (c.want == nil) != (err == nil) {
			t.Fatalf("types %q: diagnostics %v (%v) of %s; want %v", c.types, codes, err, out, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(Output))); err != nil {
		t.Fatalf("the snippet with Node typings was not emitted: %v", err)
	}
	if _, err := Detect(filepath.Join(dir, "missing", "tsc")); err == nil || !strings.Contains(err.Error(), "DESK_TSC") {
		t.Fatalf("missing: %v", err)
	}
	script := filepath.Join(dir, "tsc")
	os.WriteFile(script, []byte("#!/bin/sh\necho 5.0\n"), 0o755)
	if _, err := Detect(script); err == nil || !strings.Contains(err.Error(), "neither the native compiler") {
		t.Fatalf("a stray script: %v", err)
	}
}
