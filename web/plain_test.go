package web

import (
	"strings"
	"testing"

	"github.com/desk-runtime/desk/agent/provider"
)

// A turn that failed because desk has no provider key says so, naming
// the variable to set; a key the provider refused still reads as refused.
func TestPlainFailureNamesTheMissingKey(t *testing.T) {
	t.Parallel()
	missing := plainFailure("model call failed: " + provider.MissingKey("openai", "OPENAI_API_KEY").Error())
	if !strings.Contains(missing, "no API key") || !strings.Contains(missing, "OPENAI_API_KEY") || strings.Contains(missing, "refused") {
		t.Fatalf("a missing key reads %q", missing)
	}
	if got := plainFailure("openai: 401 Unauthorized: invalid api key"); !strings.Contains(got, "refused") {
		t.Fatalf("a refused key reads %q", got)
	}
}
