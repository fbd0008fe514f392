package agent

import (
	"testing"

	"github.com/desk-runtime/desk/internal/leaktest"
)

// TestMain fails the package's tests when any goroutine outlives them:
// every component closes what it started.
func TestMain(m *testing.M) { leaktest.Main(m) }
