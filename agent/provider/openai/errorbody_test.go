package openai

import (
	"testing"

	"github.com/desk-runtime/desk/internal/modeltest/providertest"
)

// TestErrorBodyKeepsTypeAndMessageOnly: see providertest.CheckErrorBodies.
func TestErrorBodyKeepsTypeAndMessageOnly(t *testing.T) {
	providertest.CheckErrorBodies(t, testKey, func(srv *providertest.Server) error {
		_, _, err := stream(t, newTestProvider(srv), simpleRequest())
		return err
	})
}
