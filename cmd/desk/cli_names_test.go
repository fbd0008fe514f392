package main

import (
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

// TestCLIDuplicateWorkspaceName: a taken name exits with the conflict
// code and says how to force it; --allow-duplicate-name forces it.
func TestCLIDuplicateWorkspaceName(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var first, second desk.Workspace
	c.json(&first, "workspace", "create", "acme")
	r := c.run("workspace", "create", "acme")
	if r.code() != exitConflict || r.e == nil || !strings.Contains(r.e.Error(), first.ID) || !strings.Contains(r.e.Error(), "--allow-duplicate-name") {
		t.Fatalf("second create: exit %d, %v; want %d naming %s and --allow-duplicate-name", r.code(), r.e, exitConflict, first.ID)
	}
	c.json(&second, "workspace", "create", "acme", "--allow-duplicate-name")
	if second.Name != "acme" || second.ID == first.ID {
		t.Fatalf("forced create = %+v", second)
	}
}
