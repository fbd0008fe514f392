package mcpserver_test

import (
	"testing"

	"github.com/desk-runtime/desk/internal/leaktest"
)

// TestMain fails the package's tests when any goroutine outlives them:
// the parallel tests' desks are checked here (apptest.Parallel), since a
// check per test cannot tell their goroutines apart.
func TestMain(m *testing.M) { leaktest.Main(m) }
