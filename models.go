package desk

// ModelCatalog is the operator's list of models: the default (DESK_MODEL)
// and the others it declares (DESK_MODELS), plus the script model desk
// always offers. A session runs one of them and nothing else: a model
// reference is where desk sends the operator's provider key and the
// session's whole context, so no request body may choose it freely.
type ModelCatalog interface {
	// Default is the default model's reference; "" when there is none.
	Default() string
	// Models lists what a session may choose: the default first, then
	// the other declared models in the operator's order, then "script".
	Models() []string
	// Resolve returns the declared form of a model reference (""
	// resolves to "", the default; surrounding spaces and an
	// openai-compatible base URL's case and trailing slash do not
	// matter), or an EINVALID error that names the models allowed.
	Resolve(model string) (string, error)
	// SessionModel checks the model and script a session is created
	// with, so a session never exists with a model it cannot use: the
	// model resolves as Resolve has it ("" stays "", the default, and
	// takes no script); the script model needs a script that parses and
	// no other model takes one (EINVALID). It returns the declared form.
	SessionModel(model string, script []byte) (string, error)
	// Reasoning says whether the model was declared as one that reasons
	// ("…;reasoning"); "" is the default model.
	Reasoning(model string) bool
	// CheckEffort refuses a reasoning effort that is not low, medium or
	// high, or any effort for a model not declared as reasoning
	// (EINVALID naming field).
	CheckEffort(field, model, effort string) error
}
