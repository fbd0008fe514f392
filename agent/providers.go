package agent

import (
	"context"
	"net/http"
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
//
// Their connections are a handle of the running desk: Close closes them.
type Providers struct {
	mu     sync.Mutex
	m      map[string]provider.Provider
	client *http.Client // shared by every provider made here
}

// Open is part of the component contract: connections are made on
// demand.
func (ps *Providers) Open(context.Context) error { return nil }

// Close closes the providers' idle connections; it runs once the turns
// and title calls that used them have stopped. It is idempotent, and a
// provider used after it dials again.
func (ps *Providers) Close(context.Context) error {
	ps.mu.Lock()
	c := ps.client
	ps.mu.Unlock()
	if c != nil {
		c.CloseIdleConnections()
	}
	return nil
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
	if ps.client == nil {
		// The SDKs' default client would share http.DefaultTransport,
		// whose connections nothing of desk's can close.
		ps.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	var p provider.Provider
	switch spec.Provider {
	case "openai":
		p = openai.New(openai.Options{HTTPClient: ps.client})
	case "openai-compatible":
		p = openai.New(openai.Options{BaseURL: spec.BaseURL, Name: "openai-compatible", HTTPClient: ps.client})
	case "anthropic":
		p = anthropic.New(anthropic.Options{HTTPClient: ps.client})
	default:
		return nil, &provider.Error{Kind: provider.ErrModel, Provider: spec.Provider, Message: "unknown provider " + spec.Provider}
	}
	ps.m[key] = p
	return p, nil
}
