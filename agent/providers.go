package agent

import (
	"sync"

	"github.com/desk-runtime/desk/agent/provider"
	"github.com/desk-runtime/desk/agent/provider/anthropic"
	"github.com/desk-runtime/desk/agent/provider/openai"
)

// Providers makes the real model providers, one per spec, reused across
// turns (they keep their HTTP connections). Keys come from the providers'
// usual environment variables (OPENAI_API_KEY, ANTHROPIC_API_KEY) and are
// never logged or shown; so do the base URLs of openai: and anthropic:
// models (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, read by the adapters), while
// an openai-compatible: model names its own and gets its own key
// (OPENAI_COMPATIBLE_API_KEY).
type Providers struct {
	mu sync.Mutex
	m  map[string]provider.Provider
}

// Get returns the provider of a spec.
func (ps *Providers) Get(spec provider.Spec) (provider.Provider, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.m == nil {
		ps.m = map[string]provider.Provider{}
	}
	key := spec.String()
	if p := ps.m[key]; p != nil {
		return p, nil
	}
	var p provider.Provider
	switch spec.Provider {
	case "openai":
		p = openai.New(openai.Options{})
	case "openai-compatible":
		p = openai.New(openai.Options{BaseURL: spec.BaseURL, Name: "openai-compatible"})
	case "anthropic":
		p = anthropic.New(anthropic.Options{})
	default:
		return nil, &provider.Error{Kind: provider.ErrModel, Provider: spec.Provider, Message: "unknown provider " + spec.Provider}
	}
	ps.m[key] = p
	return p, nil
}
