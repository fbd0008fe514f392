package storetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

// TestSuiteCallsEveryStoreMethod lists the methods of desk.Store by
// reflection and fails for any that the conformance suite never calls, so
// a method added to the interface cannot go untested on either store. The
// suite's source is parsed for method calls by name: a call counts when
// its name is a Store method (the suite's cases call the store under test
// and little else).
func TestSuiteCallsEveryStoreMethod(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	called := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
					called[sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	st := reflect.TypeFor[desk.Store]()
	if st.NumMethod() < 100 {
		t.Fatalf("desk.Store has only %d methods; the reflection is not looking at the store", st.NumMethod())
	}
	for i := range st.NumMethod() {
		if m := st.Method(i).Name; !called[m] {
			t.Errorf("the conformance suite never calls Store.%s: add a case for it", m)
		}
	}
}
