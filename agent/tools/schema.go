package tools

// Tool arguments are declared once, as a Go struct per tool. That struct
// is the single source of the JSON Schema the model sees (generated with
// invopop/jsonschema from its json and jsonschema tags) and of the
// decoding Run uses; the arguments a model sends are validated against
// the same compiled schema (santhosh-tekuri/jsonschema, draft 2020-12)
// before they are decoded, so a wrong type, a missing field, a value out
// of range or an unknown field comes back to the model as a BAD_INPUT
// result naming the field, never as a silent clamp or default.
//
// Tags: `json:"name"` without omitempty makes a field required;
// `json:"name,omitempty"` makes it optional (its zero value then means
// "absent", and a tool may give it a default). `jsonschema:"..."` holds
// enum, minimum, maximum, minItems and maxItems; descriptions go in
// `jsonschema_description:"..."`, which may contain commas.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	invopop "github.com/invopop/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// args is embedded in a tool to declare its argument struct A. It gives
// the tool its Schema and the decode its Run and Gate use, so the two can
// never disagree.
type args[A any] struct{}

// Schema is the JSON Schema of A, as sent to providers.
func (args[A]) Schema() json.RawMessage { return schemaFor[A]().raw }

// decode validates raw against A's schema and decodes it. A call the
// model got wrong is a BAD_INPUT result; an error means A's schema itself
// is broken (Check refuses to start desk before that can happen).
func (args[A]) decode(raw json.RawMessage) (A, *Result, error) {
	var a A
	s := schemaFor[A]()
	if s.err != nil {
		return a, nil, s.err
	}
	doc, bad := validate(s.compiled, raw)
	if bad != nil {
		return a, bad, nil
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return a, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		// The schema accepted what the struct cannot hold: a gap between
		// the two, reported plainly rather than guessed around.
		return a, Fail(CodeBadInput, "arguments: %v", err), nil
	}
	return a, nil, nil
}

// argSchema is one argument struct's schema: generated, then compiled.
type argSchema struct {
	raw      json.RawMessage
	compiled *jsonschema.Schema
	err      error
}

var schemaCache sync.Map // reflect.Type → *argSchema

func schemaFor[A any]() *argSchema {
	t := reflect.TypeFor[A]()
	if s, ok := schemaCache.Load(t); ok {
		return s.(*argSchema)
	}
	s := &argSchema{}
	s.raw, s.err = generate(t)
	if s.err == nil {
		s.compiled, s.err = compile(t.Name(), s.raw)
	}
	if s.err != nil {
		s.err = fmt.Errorf("argument schema of %s: %w", t.Name(), s.err)
	}
	got, _ := schemaCache.LoadOrStore(t, s)
	return got.(*argSchema)
}

// generate reflects t into a self-contained schema: definitions inlined
// (no $ref or $defs), no $schema or $id, unknown fields refused. The
// properties keep the struct's field order (the order a model tends to
// fill them in), so the declaration is byte-stable from turn to turn.
func generate(t reflect.Type) (json.RawMessage, error) {
	r := &invopop.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	s := r.ReflectFromType(t)
	s.Version, s.ID = "", ""
	return json.Marshal(s)
}

// providerKeywords is the JSON Schema subset OpenAI and Anthropic accept
// for tool parameters, and all desk's schemas use.
var providerKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "items": true, "enum": true, "description": true,
	"minimum": true, "maximum": true, "minItems": true, "maxItems": true, "additionalProperties": true, "anyOf": true,
}

var metaSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	// Shipped inside the library: no network.
	return jsonschema.NewCompiler().Compile("https://json-schema.org/draft/2020-12/schema")
})

// compile checks raw against the draft 2020-12 meta-schema and the
// provider subset, and compiles it for validating arguments.
func compile(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	meta, err := metaSchema()
	if err != nil {
		return nil, fmt.Errorf("the draft 2020-12 meta-schema: %w", err)
	}
	if err := meta.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("does not meet the JSON Schema 2020-12 meta-schema: %s", describe(ve, nil))
		}
		return nil, err
	}
	top, _ := doc.(map[string]any)
	if top["type"] != "object" || top["additionalProperties"] != false {
		return nil, errors.New(`the top level must be {"type":"object", …, "additionalProperties": false}`)
	}
	if err := subset(doc, ""); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	loc := "urn:desk:tool:" + name
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// subset reports a keyword outside providerKeywords, by its location.
func subset(v any, at string) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	for _, k := range sortedKeys(obj) {
		if !providerKeywords[k] {
			return fmt.Errorf("%s/%s: keyword %q is outside the subset providers accept", at, k, k)
		}
		switch k {
		case "properties":
			props, _ := obj[k].(map[string]any)
			for _, p := range sortedKeys(props) {
				if err := subset(props[p], at+"/properties/"+p); err != nil {
					return err
				}
			}
		case "items", "additionalProperties":
			if err := subset(obj[k], at+"/"+k); err != nil {
				return err
			}
		case "anyOf":
			alts, _ := obj[k].([]any)
			for i, alt := range alts {
				if err := subset(alt, fmt.Sprintf("%s/anyOf/%d", at, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Check verifies every built-in tool's argument schema: JSON, valid
// against the JSON Schema 2020-12 meta-schema, inside the subset providers
// accept, and compilable. desk refuses to start when it fails, because a
// broken schema fails every real-model turn before the provider is called.
func Check() error { return check(All()) }

func check(ts []Tool) error {
	for _, t := range ts {
		if _, err := compile(t.Name(), t.Schema()); err != nil {
			return fmt.Errorf("tool %s: invalid argument schema: %w", t.Name(), err)
		}
	}
	return nil
}

// validate parses raw and validates it against sch, returning the parsed
// arguments (integral numbers written as integers) or a BAD_INPUT result.
func validate(sch *jsonschema.Schema, raw json.RawMessage) (any, *Result) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, Fail(CodeBadInput, "arguments: not valid JSON: %v", err)
	}
	if err := sch.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, Fail(CodeBadInput, "arguments: %v", err)
		}
		return nil, Fail(CodeBadInput, "arguments: %s", describe(ve, sch))
	}
	return integral(doc), nil
}

// integral rewrites numbers like 5.0 or 1e2 as integers: JSON Schema
// counts them as integers, encoding/json would refuse them for an int.
func integral(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = integral(e)
		}
	case []any:
		for i, e := range x {
			x[i] = integral(e)
		}
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(x)); ok && r.IsInt() {
			return json.Number(r.Num().String())
		}
	}
	return v
}

var printer = message.NewPrinter(language.English)

// describe turns a validation error into one line per failed leaf, each
// naming the field by its JSON pointer: "/offset: got string, want
// integer; /path: required, missing". root, when known, lets an unknown
// field's message list the allowed ones.
func describe(ve *jsonschema.ValidationError, root *jsonschema.Schema) string {
	var lines []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		lines = append(lines, leaf(e, root)...)
	}
	walk(ve)
	sort.Strings(lines)
	lines = slices.Compact(lines)
	if len(lines) > maxProblems {
		lines = append(lines[:maxProblems], fmt.Sprintf("and %d more", len(lines)-maxProblems))
	}
	return strings.Join(lines, "; ")
}

// maxProblems bounds the problems one message lists, so a call that gets
// everything wrong still gets a short answer.
const maxProblems = 8

func leaf(e *jsonschema.ValidationError, root *jsonschema.Schema) []string {
	at := pointer(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		var out []string
		for _, m := range k.Missing {
			out = append(out, pointer(append(slices.Clone(e.InstanceLocation), m))+": required, missing")
		}
		return out
	case *kind.AdditionalProperties:
		var ptrs []string
		for _, p := range k.Properties {
			ptrs = append(ptrs, pointer(append(slices.Clone(e.InstanceLocation), p)))
		}
		sort.Strings(ptrs)
		msg := strings.Join(ptrs, ", ") + ": unknown field"
		if len(ptrs) > 1 {
			msg += "s"
		}
		if s := schemaAt(root, e.InstanceLocation); s != nil {
			msg += "; the fields are " + strings.Join(sortedKeysOf(s.Properties), ", ")
		}
		return []string{msg}
	case *kind.Minimum:
		return []string{fmt.Sprintf("%s: got %s, want at least %s", at, k.Got.RatString(), k.Want.RatString())}
	case *kind.Maximum:
		return []string{fmt.Sprintf("%s: got %s, want at most %s", at, k.Got.RatString(), k.Want.RatString())}
	case *kind.MinItems:
		return []string{fmt.Sprintf("%s: got %s, want at least %d", at, items(k.Got), k.Want)}
	case *kind.MaxItems:
		return []string{fmt.Sprintf("%s: got %s, want at most %d", at, items(k.Got), k.Want)}
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			b, _ := json.Marshal(w)
			want[i] = string(b)
		}
		got, _ := json.Marshal(k.Got)
		return []string{fmt.Sprintf("%s: got %s, want one of %s", at, got, strings.Join(want, ", "))}
	}
	return []string{at + ": " + e.ErrorKind.LocalizedString(printer)}
}

func items(n int) string {
	if n == 1 {
		return "1 item"
	}
	return fmt.Sprintf("%d items", n)
}

// pointer is the JSON pointer of an instance location; "/" for the whole
// arguments object.
func pointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	var sb strings.Builder
	for _, tok := range loc {
		sb.WriteByte('/')
		sb.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return sb.String()
}

// schemaAt follows an instance location through properties and items.
func schemaAt(s *jsonschema.Schema, loc []string) *jsonschema.Schema {
	for _, tok := range loc {
		if s == nil {
			return nil
		}
		if p, ok := s.Properties[tok]; ok {
			s = p
		} else {
			s = s.Items2020
		}
	}
	return s
}

func sortedKeysOf(m map[string]*jsonschema.Schema) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// badArg is a BAD_INPUT result about one field, for rules a schema in the
// provider subset cannot say (a field one action needs, a blank text).
func badArg(field, format string, a ...any) *Result {
	return Fail(CodeBadInput, "arguments: /%s: %s", field, fmt.Sprintf(format, a...))
}
