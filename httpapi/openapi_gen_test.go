package httpapi

// The component schemas of the OpenAPI document are generated from the Go
// types the handlers decode and write (components in schemas.go), with the
// JSON Schema reflector desk's tool schemas use (invopop/jsonschema), and
// committed as openapi/*.json. TestOpenAPIComponents regenerates them and
// fails when the committed files differ; `go generate ./httpapi` (or
// `go test ./httpapi -run TestOpenAPIComponents -update`) rewrites them.
// Descriptions come from the Go doc comments of the types and fields.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	invopop "github.com/invopop/jsonschema"
)

var update = flag.Bool("update", false, "rewrite openapi/*.json from the Go types")

const module = "github.com/desk-runtime/desk"

func TestOpenAPIComponents(t *testing.T) {
	t.Parallel()
	files, err := generateComponents()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		old, _ := filepath.Glob("openapi/*.json")
		for _, p := range old {
			if _, ok := files[filepath.Base(p)]; !ok {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join("openapi", name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	committed, _ := filepath.Glob("openapi/*.json")
	for _, p := range committed {
		if _, ok := files[filepath.Base(p)]; !ok {
			t.Errorf("%s is committed but not generated; run go generate ./httpapi", p)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		got, err := os.ReadFile(filepath.Join("openapi", name))
		if err != nil {
			t.Errorf("openapi/%s is not committed: %v; run go generate ./httpapi", name, err)
			continue
		}
		if !bytes.Equal(got, files[name]) {
			t.Errorf("openapi/%s differs from the schemas generated from the Go types; run go generate ./httpapi", name)
		}
	}
}

// TestRoutesNameComponents: every schema the route table names is
// generated, and every listed component is named by a route or reached
// from one, so the list holds nothing dead.
func TestRoutesNameComponents(t *testing.T) {
	t.Parallel()
	have := map[string]bool{}
	for _, c := range components {
		if have[c.Name] {
			t.Errorf("component %s listed twice", c.Name)
		}
		have[c.Name] = true
	}
	for _, rt := range (&Server{}).routes() {
		for _, n := range []string{rt.Body, rt.Resp} {
			if n != "" && n != "binary" && !have[n] {
				t.Errorf("%s %s names schema %s, which components does not list", rt.Method, rt.Path, n)
			}
		}
	}
	if !have["Error"] {
		t.Error("components lists no Error, the body of every error answer")
	}
	files, err := generateComponents()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]any{}
	for _, b := range files {
		var part map[string]any
		if err := json.Unmarshal(b, &part); err != nil {
			t.Fatal(err)
		}
		maps.Copy(all, part)
	}
	reached := map[string]bool{}
	var reach func(name string)
	reach = func(name string) {
		if reached[name] {
			return
		}
		reached[name] = true
		if name == "EventStream" {
			// Each frame's data is an Event; a string schema cannot
			// reference it.
			reach("Event")
		}
		b, _ := json.Marshal(all[name])
		for _, m := range refPattern.FindAllSubmatch(b, -1) {
			reach(string(m[1]))
		}
	}
	reach("Error")
	for _, rt := range (&Server{}).routes() {
		for _, n := range []string{rt.Body, rt.Resp} {
			if have[n] {
				reach(n)
			}
		}
	}
	for _, c := range components {
		if !reached[c.Name] {
			t.Errorf("component %s is named by no route and reached from none", c.Name)
		}
	}
}

var refPattern = regexp.MustCompile(`"#/components/schemas/([A-Za-z0-9_]+)"`)

// generateComponents reflects every component and the types it reaches
// into its file's JSON, keyed by file name.
func generateComponents() (map[string][]byte, error) {
	names := map[reflect.Type]string{}
	byName := map[string]reflect.Type{}
	for _, c := range components {
		if prev, ok := byName[c.Name]; ok && prev != c.Type {
			return nil, fmt.Errorf("component %s is both %v and %v", c.Name, prev, c.Type)
		}
		byName[c.Name] = c.Type
		names[c.Type] = c.Name
	}
	// Request bodies accept and ignore "origin" (docs/api.md): the server
	// stamps provenance from the token.
	requests := map[reflect.Type]bool{}
	for _, rt := range (&Server{}).routes() {
		if t, ok := byName[rt.Body]; ok {
			requests[t] = true
		}
	}
	comments := newCommentIndex()
	var nameErr error
	r := &invopop.Reflector{
		Anonymous:      true,
		ExpandedStruct: true,
		Namer: func(t reflect.Type) string {
			if n, ok := names[t]; ok {
				return n
			}
			n := t.Name()
			if n == "" {
				return ""
			}
			if prev, ok := byName[n]; ok && prev != t && nameErr == nil {
				nameErr = fmt.Errorf("two types are schema %s: %v and %v; list one under another name in components", n, prev, t)
			}
			byName[n] = t
			return n
		},
		LookupComment: comments.lookup,
		// The reflector describes structs, slices and maps only; a named
		// string (a stream's body) gets its comment here.
		Mapper: func(t reflect.Type) *invopop.Schema {
			if t.Kind() != reflect.String || t.PkgPath() == "" || names[t] == "" {
				return nil
			}
			return &invopop.Schema{Type: "string", Description: comments.lookup(t, "")}
		},
		AdditionalFields: func(t reflect.Type) []reflect.StructField {
			if !requests[t] {
				return nil
			}
			return []reflect.StructField{{Name: "Origin", Type: reflect.TypeFor[json.RawMessage](),
				Tag: `json:"origin,omitempty" jsonschema_description:"ignored: provenance is stamped by the server from the token"`}}
		},
	}
	schemas := map[string]*invopop.Schema{}
	fileOf := map[string]string{}
	for _, c := range components {
		fileOf[c.Name] = c.File
	}
	add := func(name, file string, s *invopop.Schema) error {
		if prev, ok := schemas[name]; ok {
			a, _ := json.Marshal(prev)
			b, _ := json.Marshal(s)
			if !bytes.Equal(a, b) {
				return fmt.Errorf("schema %s reflected two ways:\n%s\n%s", name, a, b)
			}
			return nil
		}
		schemas[name] = s
		if _, ok := fileOf[name]; !ok {
			fileOf[name] = file
		}
		return nil
	}
	for _, c := range components {
		s := r.ReflectFromType(c.Type)
		defs := s.Definitions
		s.Version, s.ID, s.Definitions = "", "", nil
		if err := add(c.Name, c.File, s); err != nil {
			return nil, err
		}
		for _, n := range slices.Sorted(maps.Keys(defs)) {
			if err := add(n, c.File, defs[n]); err != nil {
				return nil, err
			}
		}
	}
	if nameErr != nil {
		return nil, nameErr
	}
	for _, e := range enums {
		name := names[e.Type]
		if name == "" {
			name = e.Type.Name()
		}
		s, ok := schemas[name]
		if !ok || byName[name] != e.Type || s.Properties == nil {
			return nil, fmt.Errorf("enums names %v, which no component reaches", e.Type)
		}
		p, ok := s.Properties.Get(e.Field)
		if !ok || p.Type != "string" {
			return nil, fmt.Errorf("enums names %s.%s, which is no string property", name, e.Field)
		}
		for _, v := range e.Values {
			p.Enum = append(p.Enum, v)
		}
	}
	for name, s := range schemas {
		if t, ok := byName[name]; ok {
			nullable(s, t)
		}
		relink(s)
	}
	perFile := map[string]map[string]*invopop.Schema{}
	for name, s := range schemas {
		f := fileOf[name]
		if perFile[f] == nil {
			perFile[f] = map[string]*invopop.Schema{}
		}
		perFile[f][name] = s
	}
	out := map[string][]byte{}
	for f, part := range perFile {
		b, err := json.Marshal(part)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, b, "", " "); err != nil {
			return nil, err
		}
		buf.WriteByte('\n')
		out[f+".json"] = buf.Bytes()
	}
	return out, nil
}

// nullable lets a pointer field without omitempty be null, as
// encoding/json writes a nil one; the reflector would promise the
// pointee.
func nullable(s *invopop.Schema, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || s.Properties == nil {
		return
	}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" {
			nullable(s, f.Type)
			continue
		}
		if f.Type.Kind() != reflect.Pointer || slices.Contains(strings.Split(opts, ","), "omitempty") {
			continue
		}
		if name == "" {
			name = f.Name
		}
		p, ok := s.Properties.Get(name)
		if !ok {
			continue
		}
		s.Properties.Set(name, &invopop.Schema{Description: p.Description, AnyOf: []*invopop.Schema{p, {Type: "null"}}})
		p.Description = ""
	}
}

// relink points the reflector's references into the document's
// components, where every definition is written.
func relink(s *invopop.Schema) {
	if s == nil {
		return
	}
	if n, ok := strings.CutPrefix(s.Ref, "#/$defs/"); ok {
		s.Ref = "#/components/schemas/" + n
	}
	for _, l := range [][]*invopop.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
		for _, c := range l {
			relink(c)
		}
	}
	for _, c := range []*invopop.Schema{s.Not, s.If, s.Then, s.Else, s.Items, s.Contains, s.AdditionalProperties, s.PropertyNames} {
		relink(c)
	}
	for _, c := range s.PatternProperties {
		relink(c)
	}
	if s.Properties != nil {
		for p := s.Properties.Oldest(); p != nil; p = p.Next() {
			relink(p.Value)
		}
	}
}

// commentIndex holds the doc comments of the module's packages, read from
// their source as the reflector asks for them.
type commentIndex struct {
	root string // the module's directory
	docs map[string]map[string]string
}

func newCommentIndex() *commentIndex {
	root, _ := filepath.Abs("..")
	return &commentIndex{root: root, docs: map[string]map[string]string{}}
}

// lookup is the description of type t (field "") or of its field: a
// type's first sentence, a field's whole comment, on one line.
func (c *commentIndex) lookup(t reflect.Type, field string) string {
	pkg := t.PkgPath()
	if pkg != module && !strings.HasPrefix(pkg, module+"/") {
		return ""
	}
	d, ok := c.docs[pkg]
	if !ok {
		d = c.parse(filepath.Join(c.root, strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")))
		c.docs[pkg] = d
	}
	key := t.Name()
	if field != "" {
		key += "." + field
	}
	return d[key]
}

func (c *commentIndex) parse(dir string) map[string]string {
	out := map[string]string{}
	fset := token.NewFileSet()
	ents, _ := os.ReadDir(dir)
	var p doc.Package
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			continue
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				ts := spec.(*ast.TypeSpec)
				text := ts.Doc.Text()
				if text == "" && len(g.Specs) == 1 {
					text = g.Doc.Text()
				}
				if text != "" {
					out[ts.Name.Name] = oneLine(p.Synopsis(text))
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, fld := range st.Fields.List {
					text := fld.Doc.Text()
					if text == "" {
						text = fld.Comment.Text()
					}
					for _, name := range fld.Names {
						if text != "" {
							out[ts.Name.Name+"."+name.Name] = oneLine(text)
						}
					}
				}
			}
		}
	}
	return out
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
