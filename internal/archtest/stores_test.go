package archtest

import (
	"bufio"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)


// TestStoreNamedOnlyByAppAndStores checks issue #24's rule that desk.Store,
// the union of every store method, is named only by the wiring (app) and
// the implementations (store/…). Every other package declares a Store
// interface of the methods it calls, so a reader sees what a service may
// touch and a fake for its tests implements a handful of methods, not 150.
// Only production code is checked: a test may hand a whole store around.
func TestStoreNamedOnlyByAppAndStores(t *testing.T) {
	t.Parallel()
	root, module := moduleRoot(t)
	var files, allowed int
	var bad []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		uses, err := storeUses(p, module)
		if err != nil {
			return err
		}
		files++
		switch {
		case len(uses) == 0:
		case dir == "app" || dir == "store" || strings.HasPrefix(dir, "store/"):
			allowed += len(uses)
		default:
			for _, pos := range uses {
				bad = append(bad, filepath.ToSlash(rel)+":"+strconv.Itoa(pos.Line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must have seen the repository, or the rule holds vacuously.
	if files < 100 || allowed == 0 {
		t.Fatalf("walked %d files under %s and found desk.Store in app and store/… %d times; the walk missed the repository", files, root, allowed)
	}
	for _, b := range bad {
		t.Errorf("%s names desk.Store: declare a package-local Store interface of the methods the package calls and take that (only app and store/… name desk.Store)", b)
	}
}

// storeUses returns where the Go file at path refers to the root package's
// Store type, whatever name it imports the root package under.
func storeUses(path, module string) ([]token.Position, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	local := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == module {
			local = "desk"
			if im.Name != nil {
				local = im.Name.Name
			}
		}
	}
	if local == "" || local == "_" {
		return nil, nil
	}
	var uses []token.Position
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && x.Name == local && n.Sel.Name == "Store" {
				uses = append(uses, fset.Position(n.Pos()))
			}
		case *ast.Ident:
			// A dot import makes the type a bare identifier.
			if local == "." && n.Name == "Store" {
				uses = append(uses, fset.Position(n.Pos()))
			}
		}
		return true
	})
	return uses, nil
}

// moduleRoot walks up from the test's directory to the go.mod and returns
// its directory and module path.
func moduleRoot(t *testing.T) (dir, module string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(m), `"`)
				}
			}
			t.Fatalf("%s/go.mod names no module", dir)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
