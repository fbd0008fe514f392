// Package models owns the operator's model catalog: the models a desk
// offers (DESK_MODEL, the default, and DESK_MODELS) and the one check that
// a model reference is among them. Every door that sets a session's model
// and every place that is about to call a model asks it, so an actor can
// never point the operator's key, or a turn's context, at a server of its
// choosing; base URLs come only from the operator's environment
// (OPENAI_BASE_URL, ANTHROPIC_BASE_URL) or a declared openai-compatible
// entry.
package models

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/provider"
	"github.com/desk-runtime/desk/agent/provider/script"
)

// Script is the script model, desk's own scripted stand-in for a model:
// it calls nothing outside desk, so it is always offered.
const Script = "script"

// Catalog is the operator's models. It is immutable once made and safe
// for concurrent use; the zero value (and nil) offers only the script
// model.
type Catalog struct {
	def    provider.Spec   // Provider "" when there is no default
	specs  []provider.Spec // declared, the default first, no duplicates
	byKey  map[string]provider.Spec
	models []string // what Models returns
	// reasoning are the keys of the models declared ";reasoning": the
	// only ones a reasoning effort may be asked of.
	reasoning map[string]bool
}

// ReasoningSuffix marks a declared model (in DESK_MODEL or DESK_MODELS) as
// one that reasons: "anthropic:claude-sonnet-4-5;reasoning". A session of
// it may ask for a reasoning effort; of any other model, asking is
// refused, since a provider answers an unknown reasoning field with an
// error only at the first turn.
const ReasoningSuffix = ";reasoning"

// cutReasoning splits the ";reasoning" mark off a declaration.
func cutReasoning(m string) (string, bool) {
	m = strings.TrimSpace(m)
	base, ok := strings.CutSuffix(m, ReasoningSuffix)
	return strings.TrimSpace(base), ok
}

var _ desk.ModelCatalog = (*Catalog)(nil)

// Split reads a DESK_MODELS value: references separated by commas, with
// spaces around them and empty entries ignored.
func Split(list string) []string {
	var out []string
	for e := range strings.SplitSeq(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// New makes the catalog of a default model ("" for none) and the other
// declared ones. A reference that does not parse is an error naming it,
// so a typo stops desk at startup instead of refusing sessions later.
func New(defaultModel string, declared []string) (*Catalog, error) {
	c := &Catalog{byKey: map[string]provider.Spec{}, reasoning: map[string]bool{}}
	add := func(s provider.Spec) {
		if s.Provider == Script {
			return
		}
		if _, dup := c.byKey[key(s)]; dup {
			return
		}
		c.byKey[key(s)] = s
		c.specs = append(c.specs, s)
	}
	if strings.TrimSpace(defaultModel) != "" {
		m, r := cutReasoning(defaultModel)
		s, err := provider.ParseSpec(m)
		if err != nil {
			return nil, fmt.Errorf("DESK_MODEL: %w", err)
		}
		c.def = s
		add(s)
		if r && s.Provider != Script {
			c.reasoning[key(s)] = true
		}
	}
	for _, m := range declared {
		m, r := cutReasoning(m)
		s, err := provider.ParseSpec(m)
		if err != nil {
			return nil, fmt.Errorf("DESK_MODELS entry %q: %w", m, err)
		}
		add(s)
		if r && s.Provider != Script {
			c.reasoning[key(s)] = true
		}
	}
	if c.def.Provider == Script {
		c.models = append(c.models, Script)
	}
	for _, s := range c.specs {
		c.models = append(c.models, s.String())
	}
	if c.def.Provider != Script {
		c.models = append(c.models, Script)
	}
	return c, nil
}

// key is the form two references to the same model share: an
// openai-compatible base URL's scheme and host are case-insensitive and
// its trailing slashes do not matter.
func key(s provider.Spec) string {
	if s.Provider != "openai-compatible" {
		return s.String()
	}
	u, err := url.Parse(s.BaseURL)
	if err != nil {
		return s.String()
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	u.Path, u.RawPath = strings.TrimRight(u.Path, "/"), strings.TrimRight(u.RawPath, "/")
	return s.Provider + ":" + u.String() + "#" + s.Model
}

// Default is the default model's reference, "" when there is none.
func (c *Catalog) Default() string {
	if c == nil || c.def.Provider == "" {
		return ""
	}
	return c.def.String()
}

// Models lists the models a session may choose: the default first, the
// other declared ones in order, then the script model.
func (c *Catalog) Models() []string {
	if c == nil || len(c.models) == 0 {
		return []string{Script}
	}
	return append([]string(nil), c.models...)
}

// Declared lists the declared models' specs (the script model is not
// one), the default first.
func (c *Catalog) Declared() []provider.Spec {
	if c == nil {
		return nil
	}
	return append([]provider.Spec(nil), c.specs...)
}

// Resolve returns the declared form of model; "" (the default) and
// "script" resolve to themselves. Anything else not declared is an
// EINVALID error naming what is.
func (c *Catalog) Resolve(model string) (string, error) {
	if strings.TrimSpace(model) == "" {
		return "", nil
	}
	s, err := c.Spec(model)
	if err != nil {
		return "", err
	}
	return s.String(), nil
}

// SessionModel checks a session's model reference against the catalog
// and, for the script model, its script, so a session never exists with
// a model it cannot use; it returns the declared form.
func (c *Catalog) SessionModel(model string, scr []byte) (string, error) {
	if model == "" {
		if len(scr) > 0 {
			return "", desk.Errorf(desk.EINVALID, `a script needs "model": "script"`)
		}
		return "", nil
	}
	model, err := c.Resolve(model)
	if err != nil {
		return "", err
	}
	spec, err := provider.ParseSpec(model)
	if err != nil {
		return "", desk.Errorf(desk.EINVALID, "%v", err)
	}
	if spec.Provider == Script {
		if len(scr) == 0 {
			return "", desk.Errorf(desk.EINVALID, `the script model needs a "script": {"steps": [...]}`)
		}
		if _, err := script.Parse(scr); err != nil {
			return "", desk.Errorf(desk.EINVALID, "%v", err)
		}
	} else if len(scr) > 0 {
		return "", desk.Errorf(desk.EINVALID, "only the script model takes a script")
	}
	return model, nil
}

// Check is Resolve without the declared form.
func (c *Catalog) Check(model string) error {
	_, err := c.Resolve(model)
	return err
}

// Spec returns the declared spec of a model reference ("" names the
// default), or an EINVALID error naming the models allowed.
func (c *Catalog) Spec(model string) (provider.Spec, error) {
	if strings.TrimSpace(model) == "" {
		if c == nil || c.def.Provider == "" {
			return provider.Spec{}, desk.Errorf(desk.EINVALID, "this desk has no default model; choose one of: %s", c.allowed())
		}
		return c.def, nil
	}
	s, err := provider.ParseSpec(model)
	if err != nil {
		return provider.Spec{}, desk.Errorf(desk.EINVALID, "%v; this desk offers: %s", err, c.allowed())
	}
	if s.Provider == Script {
		return s, nil
	}
	if c != nil {
		if d, ok := c.byKey[key(s)]; ok {
			return d, nil
		}
	}
	return provider.Spec{}, desk.Errorf(desk.EINVALID, "model %q is not offered by this desk; choose one of: %s", s.String(), c.allowed())
}

// Find returns the declared model of a provider by its model name alone
// (the name a client of that provider's API sends), the first declared
// when several openai-compatible servers serve the same name.
func (c *Catalog) Find(providerName, model string) (provider.Spec, bool) {
	if c == nil {
		return provider.Spec{}, false
	}
	for _, s := range c.specs {
		if s.Provider == providerName && s.Model == model {
			return s, true
		}
	}
	return provider.Spec{}, false
}

// Reasoning says whether a declared model was declared as one that
// reasons ("" is the default model).
func (c *Catalog) Reasoning(model string) bool {
	if c == nil {
		return false
	}
	s, err := c.Spec(model)
	return err == nil && c.reasoning[key(s)]
}

// ReasoningModels lists the declared models that reason.
func (c *Catalog) ReasoningModels() []string {
	var out []string
	if c == nil {
		return out
	}
	for _, s := range c.specs {
		if c.reasoning[key(s)] {
			out = append(out, s.String())
		}
	}
	return out
}

// CheckEffort refuses a reasoning effort the model cannot take: one not
// low, medium or high, or any for a model not declared as reasoning. field
// names the field in the error.
func (c *Catalog) CheckEffort(field, model, effort string) error {
	if err := desk.CheckEffort(field, effort); err != nil || effort == "" {
		return err
	}
	if !c.Reasoning(model) {
		name := model
		if name == "" {
			name = c.Default() + " (the default)"
		}
		return desk.Errorf(desk.EINVALID, "%s: model %s is not declared as a reasoning model, so it takes no reasoning effort (the operator declares one with %q after it in DESK_MODEL or DESK_MODELS)", field, name, ReasoningSuffix)
	}
	return nil
}

// allowed names the models a session may choose, the default marked.
func (c *Catalog) allowed() string {
	ms := c.Models()
	if c.Default() != "" {
		ms[0] += " (default)" // the default is listed first
	}
	return strings.Join(ms, ", ")
}
